// Package fspermtest checks, in tests, the modes fsperm gives.
package fspermtest
