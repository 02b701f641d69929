// Package data embeds the data sets shipped with ringtail, so that a
// binary built from this module finds them from any working directory.
//
// It holds bytes only: parsing lives with the code that uses a data set
// (examples/train parses the digits). It must never import anything of
// ringtail's own.
package data
