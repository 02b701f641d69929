package bench

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteHeader prints the nccl-tests column header.
func WriteHeader(w io.Writer) {
	fmt.Fprintf(w, "# %12s %12s %9s %7s %6s %12s %9s %9s %7s\n", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong")
	fmt.Fprintf(w, "# %12s %12s %9s %7s %6s %12s %9s %9s %7s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "")
}

// WriteRow prints one result as an nccl-tests row.
func WriteRow(w io.Writer, r Result) {
	fmt.Fprintf(w, "  %12d %12d %9s %7s %6d %12.1f %9.3f %9.3f %7d\n", r.SizeBytes, r.Count, r.Type, r.RedOp, r.Root, r.TimeUS, r.AlgBW, r.BusBW, r.Wrong)
}

// WriteJSON prints one result as a JSON object on its own line.
func WriteJSON(w io.Writer, r Result) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
