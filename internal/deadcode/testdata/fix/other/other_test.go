package other

import (
	"testing"

	"example.com/fix/lib"
)

func TestOther(t *testing.T) { lib.OtherTestOnly() }
