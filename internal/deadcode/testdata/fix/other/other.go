// Package other exists for its tests.
package other
