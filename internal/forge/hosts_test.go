package forge_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/forge"
)

func TestParseHosts(t *testing.T) {
	github := forge.Host{Kind: forge.KindGitHub, Host: "github.com", APIBase: "https://api.github.com"}
	cases := []struct {
		name, spec string
		want       []forge.Host
		wantErr    string
	}{
		{name: "empty", spec: "", want: []forge.Host{github}},
		{name: "github enterprise and gitea",
			spec: "github=ghe.example.com=https://ghe.example.com/api/v3,gitea=git.example.com:3000",
			want: []forge.Host{
				{Kind: forge.KindGitHub, Host: "ghe.example.com", APIBase: "https://ghe.example.com/api/v3"},
				{Kind: forge.KindGitea, Host: "git.example.com:3000", APIBase: "https://git.example.com:3000/api/v1"},
				github,
			}},
		{name: "defaults", spec: " github=GHE.example.com , gitea=git.example.com,",
			want: []forge.Host{
				{Kind: forge.KindGitHub, Host: "ghe.example.com", APIBase: "https://ghe.example.com/api/v3"},
				{Kind: forge.KindGitea, Host: "git.example.com", APIBase: "https://git.example.com/api/v1"},
				github,
			}},
		{name: "forgejo is gitea", spec: "forgejo=code.example.org=https://code.example.org/api/v1/",
			want: []forge.Host{{Kind: forge.KindGitea, Host: "code.example.org", APIBase: "https://code.example.org/api/v1"}, github}},
		{name: "github.com named", spec: "github=github.com",
			want: []forge.Host{github}},
		{name: "github.com elsewhere", spec: "github=github.com=https://proxy.example.com/github",
			want: []forge.Host{{Kind: forge.KindGitHub, Host: "github.com", APIBase: "https://proxy.example.com/github"}}},
		{name: "http on loopback", spec: "gitea=127.0.0.1:3000=http://127.0.0.1:3000/api/v1",
			want: []forge.Host{{Kind: forge.KindGitea, Host: "127.0.0.1:3000", APIBase: "http://127.0.0.1:3000/api/v1"}, github}},

		{name: "unknown kind", spec: "gitlab=gitlab.example.com", wantErr: `unknown kind "gitlab"`},
		{name: "no host", spec: "gitea", wantErr: "KIND=HOST"},
		{name: "empty host", spec: "gitea=", wantErr: "empty host"},
		{name: "URL for host", spec: "gitea=https://git.example.com", wantErr: "not a URL"},
		{name: "bad host", spec: "gitea=git example.com", wantErr: "host name"},
		{name: "bad port", spec: "gitea=git.example.com:http", wantErr: "host[:port]"},
		{name: "twice", spec: "gitea=git.example.com,github=GIT.example.com", wantErr: "twice"},
		{name: "http API", spec: "gitea=git.example.com=http://git.example.com/api/v1", wantErr: "loopback"},
		{name: "relative API", spec: "gitea=git.example.com=/api/v1", wantErr: "absolute URL"},
		{name: "empty API", spec: "gitea=git.example.com=", wantErr: "absolute URL"},
		{name: "API with credentials", spec: "gitea=git.example.com=https://bot:s3cret@git.example.com/api/v1", wantErr: "no user"},
		{name: "ftp API", spec: "gitea=git.example.com=ftp://git.example.com/api", wantErr: "want https"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := forge.ParseHosts(tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseHosts = %+v, %v; want an error with %q", got, err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("error holds a password: %v", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseHosts = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
