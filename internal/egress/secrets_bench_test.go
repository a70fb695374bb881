package egress

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"
)

// brokerBenchBody is what the download benchmarks fetch: 64 MiB.
const brokerBenchBody = 64 << 20

func brokerBenchHandler() http.Handler {
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte('a' + i%26)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Length", "67108864")
		for range brokerBenchBody / len(chunk) {
			w.Write(chunk)
		}
	})
}

func brokerBenchGet(b *testing.B, c *http.Client, path string, want int64) {
	resp, err := c.Get("https://" + brokerTestHost + path)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || n != want || resp.StatusCode != 200 {
		b.Fatalf("got %d, %d bytes: %v", resp.StatusCode, n, err)
	}
}

// BenchmarkBrokerHandshake is one new connection and one small request:
// through the broker, both TLS handshakes (sandbox-broker with a cached
// leaf, broker-upstream verified); direct, the client's one handshake
// straight to the upstream, for what the broker adds.
func BenchmarkBrokerHandshake(b *testing.B) {
	b.Setenv("AGENTBOX_TEST_GH_TOKEN", brokerTestValue)
	b.Run("broker", func(b *testing.B) {
		f := newBrokerFixture(b, brokerOpts{secrets: brokerGitHub("AGENTBOX_TEST_GH_TOKEN"), secret: "github", handler: brokerBenchHandler()})
		f.client.Transport.(*http.Transport).DisableKeepAlives = true
		for b.Loop() {
			brokerBenchGet(b, f.client, "/small", 2)
		}
	})
	b.Run("direct", func(b *testing.B) {
		c := brokerDirectClient(b)
		c.Transport.(*http.Transport).DisableKeepAlives = true
		for b.Loop() {
			brokerBenchGet(b, c, "/small", 2)
		}
	})
}

// brokerDirectClient reaches the upstream without the broker.
func brokerDirectClient(b *testing.B) *http.Client {
	f := newBrokerFixture(b, brokerOpts{handler: brokerBenchHandler()})
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", f.srv.Listener.Addr().String())
		},
		TLSClientConfig:    &tls.Config{RootCAs: f.pool, ServerName: brokerTestHost, NextProtos: []string{"http/1.1"}},
		DisableCompression: true,
	}
	b.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// BenchmarkBrokerDownload is 64 MiB through a terminated connection: with
// a secret (the body scrubbed, re-chunked) and with methods only (passed
// through with its length); direct is the same client straight to the
// upstream, for the ratio.
func BenchmarkBrokerDownload(b *testing.B) {
	b.Setenv("AGENTBOX_TEST_GH_TOKEN", brokerTestValue)
	for _, bc := range []struct {
		name   string
		secret bool
	}{{"secret", true}, {"methods", false}} {
		b.Run(bc.name, func(b *testing.B) {
			o := brokerOpts{handler: brokerBenchHandler()}
			if bc.secret {
				o.secrets, o.secret = brokerGitHub("AGENTBOX_TEST_GH_TOKEN"), "github"
			}
			f := newBrokerFixture(b, o)
			b.SetBytes(brokerBenchBody)
			for b.Loop() {
				brokerBenchGet(b, f.client, "/big", brokerBenchBody)
			}
		})
	}
	b.Run("direct", func(b *testing.B) {
		c := brokerDirectClient(b)
		b.SetBytes(brokerBenchBody)
		for b.Loop() {
			brokerBenchGet(b, c, "/big", brokerBenchBody)
		}
	})
}
