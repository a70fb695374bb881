package config

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestFromEnv(t *testing.T) {
	c, err := FromLookup(lookup(map[string]string{
		"AGENTBOX_DATA_DIR":        "/srv/agentbox",
		"AGENTBOX_SANDBOX_MEMORY":  "512m",
		"AGENTBOX_SANDBOX_CPUS":    "0.5",
		"AGENTBOX_SANDBOX_PIDS":    "64",
		"DOCKER_HOST":              "unix:///run/podman/podman.sock",
		"ANTHROPIC_API_KEY":        "k",
		"AGENTBOX_DISPLAY_SIZE":    "1280x800",
		"AGENTBOX_PUBLIC_URL":      "https://agentbox.example.com",
		"AGENTBOX_MAX_UPLOAD":      "256m",
		"AGENTBOX_LIVE_OUTPUT_MAX": "2m",

		"AGENTBOX_HTTP_HEADER_TIMEOUT":     "5s",
		"AGENTBOX_HTTP_IDLE_TIMEOUT":       "1m",
		"AGENTBOX_HTTP_BODY_TIMEOUT":       "20s",
		"AGENTBOX_HTTP_MIN_UPLOAD_RATE":    "64k",
		"AGENTBOX_HTTP_WRITE_TIMEOUT":      "90s",
		"AGENTBOX_HTTP_MAX_CONNS_PER_ADDR": "0",
		"AGENTBOX_HTTP_MAX_CONNS":          "1000",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/srv/agentbox" || c.Sandbox.MemoryBytes != 512<<20 || c.Sandbox.NanoCPUs != 5e8 ||
		c.Sandbox.PidsLimit != 64 || c.Docker.Host != "unix:///run/podman/podman.sock" || c.Model.AnthropicKey != "k" ||
		c.Sandbox.DisplayWidth != 1280 || c.Sandbox.DisplayHeight != 800 || c.Server.PublicURL != "https://agentbox.example.com" ||
		c.Server.MaxUpload != 256<<20 || c.Server.LiveOutputMax != 2<<20 {
		t.Errorf("config %+v", c)
	}
	want := HTTP{HeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute, BodyTimeout: 20 * time.Second, WriteTimeout: 90 * time.Second, MinUploadRate: 64 << 10, MaxConns: 1000}
	if c.Server.HTTP != want {
		t.Errorf("http %+v, want %+v", c.Server.HTTP, want)
	}
}

func TestDefaults(t *testing.T) {
	c, err := FromLookup(lookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sandbox
	if s.MemoryBytes != 2<<30 || s.NanoCPUs != 1e9 || s.PidsLimit != 512 || s.Network != "none" || s.Image != DefaultImage ||
		s.DisplayWidth != 1024 || s.DisplayHeight != 768 || s.Driver != "docker" || s.GuestTransport != "unix" {
		t.Errorf("defaults %+v", s)
	}
	if h := c.Server.HTTP; h.BodyTimeout != 30*time.Second || h.WriteTimeout != time.Minute || h.MinUploadRate != 32<<10 || h.MaxConnsPerAddr != 128 || h.MaxConns != 4096 ||
		h.HeaderTimeout != 10*time.Second || h.IdleTimeout != 2*time.Minute {
		t.Errorf("http defaults %+v", h)
	}
}

// TestDriverFromEnv: the driver and its guest transport are named in the
// environment; what each driver accepts (host networks, transports) is the
// driver's to check, in its New.
func TestDriverFromEnv(t *testing.T) {
	c, err := FromLookup(lookup(map[string]string{"AGENTBOX_DRIVER": "microvm", "AGENTBOX_GUEST_TRANSPORT": "tcp", "AGENTBOX_SANDBOX_NETWORK": "host"}))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Sandbox; s.Driver != "microvm" || s.GuestTransport != "tcp" || s.Network != "host" {
		t.Errorf("sandbox %+v", s)
	}
}

func TestSandboxBoundsDefaults(t *testing.T) {
	c, err := FromLookup(lookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sandbox
	if s.DiskBytes != 10<<30 || s.NoFile != 1024 || s.UIDs != (UIDRange{200000, 299999}) || s.MinFreeDisk != 2<<30 || c.Server.Retention != 7*24*time.Hour ||
		c.Server.MaxUpload != 1<<30 || s.MinFreeInodes != 200_000 || c.Server.LiveOutputMax != 8<<20 {
		t.Errorf("defaults %+v, retention %v", s, c.Server.Retention)
	}
	ce := s.Ceilings
	if ce.MemoryBytes < 2<<30 || ce.MemoryBytes > hostMemory() && hostMemory() > 4<<30 || ce.NanoCPUs != int64(runtime.NumCPU())*1e9 ||
		ce.PidsLimit != 4096 || ce.DiskBytes != 100<<30 || ce.Timeout != 24*time.Hour || ce.MaxSteps != 100_000 {
		t.Errorf("ceilings %+v on a host with %d bytes", ce, hostMemory())
	}
	c, err = FromLookup(lookup(map[string]string{"AGENTBOX_CEILING_MEMORY": "8g", "AGENTBOX_CEILING_CPUS": "1.5", "AGENTBOX_SANDBOX_UIDS": "500000-500100",
		"AGENTBOX_SANDBOX_DISK": "1g", "AGENTBOX_SANDBOX_NOFILE": "4096", "AGENTBOX_RETENTION": "48h", "AGENTBOX_CEILING_STEPS": "10", "AGENTBOX_MIN_FREE_DISK": "512m",
		"AGENTBOX_MIN_FREE_INODES": "5000"}))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Sandbox; s.Ceilings.MemoryBytes != 8<<30 || s.Ceilings.NanoCPUs != 15e8 || s.UIDs != (UIDRange{500000, 500100}) ||
		s.DiskBytes != 1<<30 || s.NoFile != 4096 || c.Server.Retention != 48*time.Hour || s.Ceilings.MaxSteps != 10 || s.MinFreeDisk != 512<<20 ||
		s.MinFreeInodes != 5000 {
		t.Errorf("from env: %+v", c)
	}
}

func TestFitFiles(t *testing.T) {
	for _, tt := range []struct {
		fileMax      int64
		conc         int
		pids, nofile int64
		want         int64
		err          string
	}{
		{2_466_183, 2, 512, 1024, 1024, ""},   // this kind of host: fits as configured
		{2_466_183, 8, 512, 1024, 301, ""},    // lowered to fit half of fs.file-max
		{800_000, 2, 512, 1024, 390, ""},      // a small host
		{100_000, 16, 4096, 1024, 0, "lower"}, // cannot fit even 256 files each
	} {
		got, err := FitFiles(tt.fileMax, tt.conc, tt.pids, tt.nofile)
		if got != tt.want || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("FitFiles(%d, %d, %d, %d) = %d, %v; want %d, %q", tt.fileMax, tt.conc, tt.pids, tt.nofile, got, err, tt.want, tt.err)
		}
		if err == nil && FileBudget(tt.conc, tt.pids, got) > tt.fileMax/2 {
			t.Errorf("FitFiles(%d, ...) = %d leaves no margin", tt.fileMax, got)
		}
	}
}

func TestFileTableNeed(t *testing.T) {
	// Two sandboxes of 12 GiB, a file per 400 bytes, held to half the table.
	if got, want := FileTableNeed(2, 12<<30), 2*int64(12<<30/400)*2; got != want {
		t.Errorf("FileTableNeed = %d, want %d", got, want)
	}
	if FileTableNeed(0, 1<<30) != FileTableNeed(1, 1<<30) {
		t.Error("an API-only server is not counted as one sandbox")
	}
}

func TestInvalid(t *testing.T) {
	tests := map[string]struct {
		env  map[string]string
		want string
	}{
		"memory words":       {map[string]string{"AGENTBOX_SANDBOX_MEMORY": "lots"}, "AGENTBOX_SANDBOX_MEMORY"},
		"memory tiny":        {map[string]string{"AGENTBOX_SANDBOX_MEMORY": "1m"}, "at least 64MiB"},
		"cpus zero":          {map[string]string{"AGENTBOX_SANDBOX_CPUS": "0"}, "AGENTBOX_SANDBOX_CPUS"},
		"pids few":           {map[string]string{"AGENTBOX_SANDBOX_PIDS": "3"}, "at least 32"},
		"pids words":         {map[string]string{"AGENTBOX_SANDBOX_PIDS": "many"}, `AGENTBOX_SANDBOX_PIDS: "many" is not a whole number`},
		"tokens words":       {map[string]string{"AGENTBOX_MAX_TOKENS": "1e6"}, `AGENTBOX_MAX_TOKENS: "1e6" is not a whole number`},
		"cost words":         {map[string]string{"AGENTBOX_MAX_COST": "$5"}, `AGENTBOX_MAX_COST: "$5" is not a number of dollars`},
		"network of words":   {map[string]string{"AGENTBOX_SANDBOX_NETWORK": "my net"}, "sandbox network"},
		"driver of words":    {map[string]string{"AGENTBOX_DRIVER": "a b"}, "sandbox driver"},
		"transport, words":   {map[string]string{"AGENTBOX_GUEST_TRANSPORT": "t c p"}, "guest transport"},
		"bad instance":       {map[string]string{"AGENTBOX_INSTANCE": "a b"}, "instance"},
		"display words":      {map[string]string{"AGENTBOX_DISPLAY_SIZE": "big"}, "WIDTHxHEIGHT"},
		"display tiny":       {map[string]string{"AGENTBOX_DISPLAY_SIZE": "10x10"}, "320x200"},
		"public URL path":    {map[string]string{"AGENTBOX_PUBLIC_URL": "https://example.com/agentbox"}, "without a path"},
		"public URL scheme":  {map[string]string{"AGENTBOX_PUBLIC_URL": "ftp://example.com"}, "public URL"},
		"disk tiny":          {map[string]string{"AGENTBOX_SANDBOX_DISK": "1m"}, "sandbox disk 1MiB: at least 64MiB"},
		"nofile huge":        {map[string]string{"AGENTBOX_SANDBOX_NOFILE": "99999999"}, "AGENTBOX_SANDBOX_NOFILE"},
		"uids of people":     {map[string]string{"AGENTBOX_SANDBOX_UIDS": "1000-2000"}, "from 10000 up"},
		"uids with nobody":   {map[string]string{"AGENTBOX_SANDBOX_UIDS": "60000-70000"}, "65534"},
		"uids words":         {map[string]string{"AGENTBOX_SANDBOX_UIDS": "many"}, "FIRST-LAST"},
		"default over":       {map[string]string{"AGENTBOX_SANDBOX_MEMORY": "4g", "AGENTBOX_CEILING_MEMORY": "2g"}, "default sandbox memory 4GiB is over its ceiling 2GiB (AGENTBOX_CEILING_MEMORY)"},
		"disk over":          {map[string]string{"AGENTBOX_CEILING_DISK": "5g"}, "default sandbox disk 10GiB is over its ceiling 5GiB"},
		"retention words":    {map[string]string{"AGENTBOX_RETENTION": "a week"}, "AGENTBOX_RETENTION"},
		"upload words":       {map[string]string{"AGENTBOX_MAX_UPLOAD": "a lot"}, "AGENTBOX_MAX_UPLOAD"},
		"live output words":  {map[string]string{"AGENTBOX_LIVE_OUTPUT_MAX": "plenty"}, "AGENTBOX_LIVE_OUTPUT_MAX"},
		"body timeout none":  {map[string]string{"AGENTBOX_HTTP_BODY_TIMEOUT": "0s"}, "AGENTBOX_HTTP_BODY_TIMEOUT 0s: at least 100ms"},
		"write timeout tiny": {map[string]string{"AGENTBOX_HTTP_WRITE_TIMEOUT": "10ms"}, "AGENTBOX_HTTP_WRITE_TIMEOUT 10ms: at least 100ms"},
		"rate words":         {map[string]string{"AGENTBOX_HTTP_MIN_UPLOAD_RATE": "fast"}, "AGENTBOX_HTTP_MIN_UPLOAD_RATE"},
		"conns per addr":     {map[string]string{"AGENTBOX_HTTP_MAX_CONNS_PER_ADDR": "-1"}, "AGENTBOX_HTTP_MAX_CONNS_PER_ADDR -1"},
		"conns few":          {map[string]string{"AGENTBOX_HTTP_MAX_CONNS": "8"}, "AGENTBOX_HTTP_MAX_CONNS 8: at least 16"},
		"per addr over all":  {map[string]string{"AGENTBOX_HTTP_MAX_CONNS": "100"}, "AGENTBOX_HTTP_MAX_CONNS_PER_ADDR is over"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := FromLookup(lookup(tt.env))
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "strconv") {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestImagesFromEnv(t *testing.T) {
	c, err := FromLookup(lookup(map[string]string{
		"AGENTBOX_IMAGE":  "agentbox-sandbox",
		"AGENTBOX_IMAGES": " python-ml, node-tools:20 ,,docker.io/library/python-ml:latest,registry.local:5000/team/img",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"python-ml:latest", "node-tools:20", "python-ml:latest", "registry.local:5000/team/img:latest"}
	if strings.Join(c.Sandbox.Images, " ") != strings.Join(want, " ") {
		t.Errorf("images %q, want %q", c.Sandbox.Images, want)
	}
	allowed := []string{"agentbox-sandbox:latest", "python-ml:latest", "node-tools:20", "registry.local:5000/team/img:latest"}
	if got := c.Sandbox.AllowedImages(); strings.Join(got, " ") != strings.Join(allowed, " ") {
		t.Errorf("allowed %q, want %q", got, allowed)
	}
	if _, err := FromLookup(lookup(map[string]string{"AGENTBOX_IMAGES": "ok,Not Valid"})); err == nil ||
		!strings.Contains(err.Error(), "AGENTBOX_IMAGES") || !strings.Contains(err.Error(), "Not Valid") {
		t.Errorf("a bad name: %v", err)
	}
}

// TestStore: AGENTBOX_STORE names SQLite or a PostgreSQL URL; anything else
// is refused without showing a password.
func TestStore(t *testing.T) {
	for _, tc := range []struct {
		store    string
		postgres bool
		ok       bool
	}{
		{"", false, true},
		{"sqlite", false, true},
		{"postgres://agentbox:pw@db:5432/agentbox", true, true},
		{"postgresql://db/agentbox?sslmode=require", true, true},
		{"mysql://agentbox:pw@db/agentbox", false, false},
		{"Postgres", false, false},
	} {
		c, err := FromLookup(lookup(map[string]string{"AGENTBOX_STORE": tc.store}))
		if (err == nil) != tc.ok || err != nil && strings.Contains(err.Error(), "pw@") {
			t.Errorf("AGENTBOX_STORE=%q: %v, want ok %v and no password", tc.store, err, tc.ok)
		}
		if tc.ok && (c.Store != tc.store || StoreIsPostgres(c.Store) != tc.postgres) {
			t.Errorf("AGENTBOX_STORE=%q: store %q, postgres %v", tc.store, c.Store, StoreIsPostgres(c.Store))
		}
	}
}
