// Package route finds the local address a host is reached from: the IP a
// rank advertises to its peers, a launcher to its remote ranks, an elastic
// node to its seeds.
package route
