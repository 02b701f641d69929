// Package testbed builds a multi-host network on one Linux machine for
// tests and benchmarks: N network namespaces ("hosts"), each with one
// interface eth0 whose veth peer is a port of a bridge that lives in a
// namespace of its own (the "hub", which also has an address on the
// bridge: the natural place for a launcher, like a login node). Nothing
// touches the root namespace's interfaces, routes or firewall.
//
//	hub namespace: br0 (Hub address) ── p0 ─┬─ veth ─ eth0 in host 0 (Hosts[0] address)
//	                                   p1 ─┼─ veth ─ eth0 in host 1
//	                                   ... ┘
//
// Per-host links (Bed.SetLink) are shaped where the kernel can: a rate
// with tbf on both ends of the host's veth (the host's egress and the
// hub's egress toward it), packet loss with an nftables numgen rule on the
// host's eth0 in both directions. This kernel has no sch_netem, so delay,
// jitter and stalls come from a transparent userspace TCP proxy in the
// host's namespace: nftables redirects every TCP connection the host
// accepts or opens on eth0 to a proxy that this process runs inside the
// namespace (sockets made on a thread switched into it with setns), which
// reads the original destination (SO_ORIGINAL_DST), connects to it with a
// firewall mark that exempts the connection from the redirect, and pipes
// the bytes through Shopify toxiproxy's toxics: its latency toxic (delay
// ± jitter, whole milliseconds) and a stall gate of this package
// (Bed.Stall holds all bytes of the host for a duration, losing none).
// Only connections opened after the proxy is in place go through it.
//
// Every bed is named rtb-PID-XXXX (PID of the creating process, four
// random hex digits): hosts rtb-PID-XXXX-h0..., hub rtb-PID-XXXX-hub. So
// parallel beds never collide, and Sweep removes the namespaces of beds
// whose process is gone (a crashed test run); New sweeps first. Close
// kills whatever still runs in the bed's namespaces and deletes them;
// ForTest registers it with t.Cleanup, and the script scripts/testbed.sh
// traps signals to do the same.
//
// Processes reach a host through `ip netns exec NAME`, which is also what
// `ringtail run --ssh "ip netns exec"` uses with host names that are
// namespace names (Bed.HostList): ranks start on the bed the way they
// start on real hosts. Bed.RunArgs gives the launcher flags, and the
// launcher itself runs in the hub (Bed.HubCommand).
//
// It needs root, iproute2 (ip, tc) and, for loss and the proxy, nftables
// (nft). Require and ForTest skip a test with the reason when they are
// missing (and fail it under CI=true when root but a tool is missing:
// .ci/run installs them). The package shells out to ip, tc and nft, so
// what it does can be read and repeated by hand.
package testbed
