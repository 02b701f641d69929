package balance

import "fmt"

// MemoryFraction is the share of free device memory a batch may occupy when
// deriving the batch-size limit (AntDT footnote 5: "the batch size where GPU
// memory usage is 95%").
const MemoryFraction = 0.95

// MaxBatchFromMemory returns B̂_max = ⌊0.95·freeBytes / bytesPerSample⌋, the
// largest batch whose activations fit in 95% of the device's free memory.
// freeBytes is what is left after the model, optimizer state and workspace
// are resident; bytesPerSample is the marginal memory of one more sample.
// It returns ErrInfeasible when not even one sample fits.
func MaxBatchFromMemory(freeBytes, bytesPerSample int64) (int, error) {
	if bytesPerSample <= 0 {
		return 0, fmt.Errorf("%w: bytes per sample %d must be positive", ErrInvalidInput, bytesPerSample)
	}
	if freeBytes < 0 {
		return 0, fmt.Errorf("%w: free memory %d is negative", ErrInvalidInput, freeBytes)
	}
	// Integer arithmetic: 0.95 = 19/20, split to avoid overflow.
	usable := freeBytes/20*19 + (freeBytes%20)*19/20
	b := usable / bytesPerSample
	if b < 1 {
		return 0, fmt.Errorf("%w: %d free bytes hold no sample of %d bytes at %.0f%%", ErrInfeasible, freeBytes, bytesPerSample, MemoryFraction*100)
	}
	return int(b), nil
}
