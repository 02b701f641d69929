package settings

import "testing"

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"16GiB": 16 << 30, "512MiB": 512 << 20, "1.5GB": 1_500_000_000, "1024": 1024, " 2 GiB ": 2 << 30, "7B": 7} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-1GiB", "lots", "1e30GiB"} {
		if _, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) accepted", in)
		}
	}
}

func TestRankBytesIsOneForAllOrOnePerRank(t *testing.T) {
	for _, c := range []struct {
		spec        string
		rank, world int
		want        int64
	}{
		{"16GiB", 3, 4, 16 << 30}, {"16GiB,16GiB,32GiB,32GiB", 2, 4, 32 << 30}, {"", 0, 2, 0}, {"100,200", 1, 2, 200},
	} {
		if got, err := RankBytes(c.spec, c.rank, c.world); err != nil || got != c.want {
			t.Errorf("RankBytes(%q, %d, %d) = %d, %v; want %d", c.spec, c.rank, c.world, got, err, c.want)
		}
	}
	for _, spec := range []string{"1GiB,2GiB,3GiB", "1GiB,lots"} {
		if _, err := RankBytes(spec, 1, 2); err == nil {
			t.Errorf("RankBytes(%q, 1, 2) accepted", spec)
		}
	}
}
