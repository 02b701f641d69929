// Package event is the record the fault harness's worker prints, one JSON
// object a line on stdout (which `ringtail run` prefixes with "[rank] "),
// and the harness parses.
package event
