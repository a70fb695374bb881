package guest

// A sandbox has no network interface but loopback. Its processes reach the
// host's egress proxy through the guest: the guest listens on
// 127.0.0.1:EgressPort inside, and carries each connection accepted there
// to the host over the host's own channel to the guest (the transport every
// other request uses). The host always dials the guest, so it posts
// "accepts" in advance: GET /egress with Connection: Upgrade and
// Upgrade: EgressUpgrade waits until a process inside connects, then the
// guest answers 101 Switching Protocols and the connection carries that
// process's bytes both ways. The guest is a pipe: what may pass is the
// proxy's to decide, on the host.

// EgressPort is the guest's TCP port on the sandbox's loopback that the
// proxy environment variables (HTTP_PROXY and the like) name.
const EgressPort = 3128

// EgressUpgrade is the protocol named in the Upgrade header of GET /egress.
const EgressUpgrade = "agentbox-egress"

// EgressCABundle is where PUT /egress/ca writes the sandbox's trust bundle
// (the image's system roots followed by the egress proxy's certificate
// authority), for SSL_CERT_FILE and the like. It is under the agent's home
// because that is a tmpfs owned by the agent's uid on every tier (the
// Docker driver's and the microVM's init's alike), so the guest, which runs
// as that uid, can write it while the root file system is read-only; /tmp
// is writable too, but world-writable and the place tools and agents clean.
// The agent can change the file, but only to its own loss: what it trusts
// decides nothing on the host.
const EgressCABundle = "/home/agent/.agentbox/ca-certificates.crt"

// MaxEgressCABytes caps the PEM of PUT /egress/ca.
const MaxEgressCABytes = 64 << 10

// EgressCA is the answer of PUT /egress/ca: where the bundle was written.
type EgressCA struct {
	Path string `json:"path"`
}
