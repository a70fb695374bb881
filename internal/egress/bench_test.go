package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"syscall"
	"testing"
	"time"
)

// BenchmarkProxyDownload downloads 256 MiB from a loopback server
// straight and through the proxy (CONNECT, over a real loopback
// connection to it, as a sandbox's stream arrives), and reports both
// throughputs, their ratio and the connection set-up the proxy adds
// (median).
func BenchmarkProxyDownload(b *testing.B) {
	const size = 256 << 20
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	go func() {
		chunk := make([]byte, 1<<20)
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for sent := 0; sent < size; sent += len(chunk) {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(srv.Addr().String())
	p, err := New("bench", Policy{Mode: ModeOpen}, Options{
		Config: &Config{}, AllowPrivate: loopback, Bytes: 1 << 50,
		Resolve: map[string][]netip.Addr{"example.com": {netip.MustParseAddr("127.0.0.1")}},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer pl.Close()
	go func() {
		for {
			c, err := pl.Accept()
			if err != nil {
				return
			}
			go p.Serve(c)
		}
	}()

	var straight, proxied, cpuStraight, cpuProxied time.Duration
	buf := make([]byte, 64<<10)
	drain := func(r io.Reader) {
		n := 0
		for {
			m, err := r.Read(buf)
			n += m
			if err != nil {
				break
			}
		}
		if n != size {
			b.Fatalf("read %d bytes, want %d", n, size)
		}
	}
	b.ResetTimer()
	for range b.N {
		start, cpu := time.Now(), cpuTime()
		c, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		drain(c)
		c.Close()
		straight += time.Since(start)
		cpuStraight += cpuTime() - cpu

		start, cpu = time.Now(), cpuTime()
		c, br := connect(b, pl.Addr().String(), port)
		drain(br)
		c.Close()
		proxied += time.Since(start)
		cpuProxied += cpuTime() - cpu
	}
	b.StopTimer()
	setupDirect, setupProxy := setups(b, pl.Addr().String())
	mbs := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / (1 << 20) }
	b.ReportMetric(mbs(straight), "straight-MiB/s")
	b.ReportMetric(mbs(proxied), "proxy-MiB/s")
	b.ReportMetric(straight.Seconds()/proxied.Seconds(), "ratio")
	b.ReportMetric(float64(median(setupProxy)-median(setupDirect))/1e3, "setup-added-µs")
	// The process runs server, client and proxy: what the proxied
	// download costs beyond the straight one is the proxy's.
	gib := float64(size) * float64(b.N) / (1 << 30)
	b.ReportMetric((cpuProxied-cpuStraight).Seconds()*1e3/gib, "proxy-cpu-ms/GiB")
	b.ReportMetric(0, "ns/op")
}

// connect opens a tunnel through the proxy at proxyAddr to example.com:port.
func connect(b *testing.B, proxyAddr, port string) (net.Conn, *bufio.Reader) {
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT example.com:%s HTTP/1.1\r\nHost: example.com:%s\r\n\r\n", port, port)
	br := bufio.NewReaderSize(c, 64<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("CONNECT: %v %v", resp, err)
	}
	return c, br
}

// setups times 200 connections to a server that sends nothing, straight
// and through the proxy (to the 200 answer).
func setups(b *testing.B, proxyAddr string) (direct, proxied []time.Duration) {
	quiet, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer quiet.Close()
	go func() {
		for {
			c, err := quiet.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	_, port, _ := net.SplitHostPort(quiet.Addr().String())
	for range 200 {
		start := time.Now()
		c, err := net.Dial("tcp", quiet.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		direct = append(direct, time.Since(start))
		c.Close()
		start = time.Now()
		c, _ = connect(b, proxyAddr, port)
		proxied = append(proxied, time.Since(start))
		c.Close()
	}
	return direct, proxied
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}
