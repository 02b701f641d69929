// Command testbed builds a multi-host test bed (internal/testbed), runs a
// command while it stands and removes it, whatever happens: the
// implementation behind scripts/testbed.sh.
//
//	testbed [--hosts 4] [--subnet 10.77.0.0/24] [--links 'link=3:rate=50mbit'] -- CMD ARGS...
//	testbed --sweep
//
// --flip HOST:BYTES routes HOST's link through the bed's proxy and flips
// one bit of the byte BYTES bytes into the first ringtail data-plane
// connection through it (a device corrupting a frame on the path: with
// frames sealed, every rank fails naming the link).
//
// CMD runs in the root namespace with these variables:
//
//	TB_HUB       the hub namespace (run the launcher in it: ip netns exec $TB_HUB ...)
//	TB_HUB_ADDR  the hub's address on the bridge (ringtail run --master-addr)
//	TB_HOSTS     the host namespaces, space-separated, by index
//	TB_ADDRS     their addresses, space-separated
//	TB_HOSTLIST  "ns0:1,ns1:1,..." for ringtail run -H
//	TB_CONTROL   the bed's control socket (internal/testbed/control): a job
//	             reshapes the links between runs and stalls them through
//	             it; pass it to ranks with ringtail run -x TB_CONTROL
//
// Its exit status is CMD's. SIGINT and SIGTERM are passed to CMD; the bed
// is removed when CMD ends.
package main
