// Package p2ptest helps the tests of libp2p listeners.
package p2ptest
