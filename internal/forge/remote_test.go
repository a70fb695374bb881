package forge_test

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/forge"
)

func TestParseRemote(t *testing.T) {
	cases := []struct {
		url, host, owner, repo string
		wantErr                string
	}{
		{url: "https://github.com/acme/widgets", host: "github.com", owner: "acme", repo: "widgets"},
		{url: "https://github.com/acme/widgets.git", host: "github.com", owner: "acme", repo: "widgets"},
		{url: "https://github.com/acme/widgets.git/", host: "github.com", owner: "acme", repo: "widgets"},
		{url: "https://GitHub.com/Acme/my.repo_1", host: "github.com", owner: "Acme", repo: "my.repo_1"},
		{url: "http://127.0.0.1:3000/acme/widgets.git", host: "127.0.0.1:3000", owner: "acme", repo: "widgets"},
		{url: "https://git.example.com:3000/acme/widgets.git", host: "git.example.com:3000", owner: "acme", repo: "widgets"},
		{url: "ssh://git@git.example.com/acme/widgets.git", host: "git.example.com", owner: "acme", repo: "widgets"},
		{url: "ssh://git@git.example.com:2222/acme/widgets.git", host: "git.example.com:2222", owner: "acme", repo: "widgets"},
		{url: "ssh://git@[::1]:2222/acme/widgets.git", host: "[::1]:2222", owner: "acme", repo: "widgets"},
		{url: "git+ssh://git@github.com/acme/widgets.git", host: "github.com", owner: "acme", repo: "widgets"},
		{url: "git@github.com:acme/widgets.git", host: "github.com", owner: "acme", repo: "widgets"},
		{url: "github.com:acme/widgets", host: "github.com", owner: "acme", repo: "widgets"},
		{url: "git@github.com:/acme/widgets.git", host: "github.com", owner: "acme", repo: "widgets"},
		{url: "  https://github.com/acme/widgets\n", host: "github.com", owner: "acme", repo: "widgets"},

		{url: "", wantErr: "empty"},
		{url: "/srv/git/widgets.git", wantErr: "local path"},
		{url: "./widgets", wantErr: "local path"},
		{url: "file:///srv/git/acme/widgets.git", wantErr: "scheme"},
		{url: "ftp://github.com/acme/widgets", wantErr: "scheme"},
		{url: "https:///acme/widgets", wantErr: "host"},
		{url: "https://github.com/acme", wantErr: "owner/repository"},
		{url: "https://github.com/acme/widgets/tree/main", wantErr: "owner/repository"},
		{url: "https://github.com/acme/.git", wantErr: "repository name"},
		{url: "https://github.com/acme/../widgets", wantErr: "owner/repository"},
		{url: "https://github.com/a%2Fb/widgets", wantErr: "owner/repository"},
		{url: "https://github.com/ac me/widgets", wantErr: "owner name"},
		{url: "https://github.com/acme/widgets\x00", wantErr: "not a URL"},
		{url: "https://github.com/acme/widgets?x=1", wantErr: "query"},
		{url: "https://github.com:99999/acme/widgets", wantErr: "host"},
		{url: "https://gith_ub.com/acme/widgets", wantErr: "host name"},
		{url: "git@[::1]:acme/widgets", wantErr: "IPv6"},
		{url: "https://user:s3cret@github.com/acme", wantErr: "owner/repository"},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			host, owner, repo, err := forge.ParseRemote(tc.url)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseRemote = %q %q %q, %v; want an error with %q", host, owner, repo, err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("error holds the URL's password: %v", err)
				}
				return
			}
			if err != nil || host != tc.host || owner != tc.owner || repo != tc.repo {
				t.Fatalf("ParseRemote = %q %q %q, %v; want %q %q %q", host, owner, repo, err, tc.host, tc.owner, tc.repo)
			}
		})
	}
}
