// Package egress is a sandbox's only way out: a proxy on the host that a
// job's sandbox reaches over agentbox's own channel to its guest (never a
// network interface), which applies the job's policy to every connection,
// refuses private, loopback, link-local and metadata addresses whatever the
// policy says, resolves names itself, injects the secrets bound to a host
// (the sandbox holds only a placeholder) and records every attempt as an
// event.Network.
//
// policy.go names the policy's types, which live in the leaf netpolicy
// (the API's wire types carry them); settings.go reads the operator's
// settings (Load).
//
// proxy.go is a job's proxy (Proxy: Serve one sandbox stream, SetPolicy,
// Denials, Close) and its events; http.go the HTTP side (plain requests
// decided one by one, CONNECT), socks.go SOCKS5, dial.go the decision and
// the dial of a checked address, addr.go the addresses refused whatever
// the policy says and the resolving, sni.go the TLS ClientHello's server
// name, conn.go the counted, bounded and watched connections, metrics.go
// and env.go what the server and the sandbox are given.
package egress
