// Command ringtail is the launcher, coordinator, benchmark and inspection
// tool of the ringtail collective-communication runtime. It only wires
// flags to library calls; behaviour lives in packages that tests reach.
package main
