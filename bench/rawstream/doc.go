// Command rawstream measures one-directional raw socket stream bandwidth
// on this host, the ceiling that bench/compare relates ringtail to.
//
// A sender goroutine writes SIZE bytes in one Write call over a loopback
// TCP or unix stream socket; a receiver goroutine reads them with
// io.ReadFull into its own SIZE buffer and answers with a 1-byte ack.
// Time per transfer = Write start to ack, mean over -iters back-to-back
// transfers after -warmup untimed ones. GB/s is decimal (1e9 bytes).
// Kernel socket buffers are left at their defaults.
//
//	go run ./bench/rawstream -net unix -size 64M -iters 10 -json
//
// Between hosts, one stream per pair of processes: a receiver
// (-serve ADDR) and a sender (-send ADDR) with the same -size, -iters and
// -warmup; the sender prints the result. bench/compare --hosts starts
// one pair per link of a ring, all at once, for the raw ring ceiling.
//
//	rawstream -serve 0.0.0.0:29500 -size 64M -iters 10 &
//	rawstream -send host2:29500 -size 64M -iters 10 -json
package main
