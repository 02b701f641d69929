package launch

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	ok := Config{NP: 2, Command: []string{"true"}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("minimal config: %v", err)
	}
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"np zero", func(c *Config) { c.NP = 0 }, "-np 0"},
		{"no command", func(c *Config) { c.Command = nil }, "no command"},
		{"empty command", func(c *Config) { c.Command = []string{""} }, "no command"},
		{"too few slots", func(c *Config) { c.Hosts = []HostSlots{{"a", 1}} }, "exceeds the 1 slots"},
		{"duplicate host", func(c *Config) { c.Hosts = []HostSlots{{"a", 1}, {"a", 1}} }, "listed twice"},
		{"ssh option host", func(c *Config) { c.Hosts = []HostSlots{{"-oProxyCommand=x", 2}} }, "starts with '-'"},
		{"zero slots", func(c *Config) { c.Hosts = []HostSlots{{"a", 0}, {"b", 2}} }, "at least 1"},
		{"env without =", func(c *Config) { c.Env = []string{"FOO"} }, "not NAME=VALUE"},
		{"env bad name", func(c *Config) { c.Env = []string{"1X=2"} }, "not a shell identifier"},
		{"env reserved", func(c *Config) { c.Env = []string{"RANK=3"} }, "set by the launcher"},
		{"env secret", func(c *Config) { c.Env = []string{"RINGTAIL_SECRET=x"} }, "set by the launcher"},
		{"env timeout conflict", func(c *Config) { c.Env = []string{"RINGTAIL_TIMEOUT=1m"}; c.Timeout = time.Minute }, "conflicts"},
		{"secret newline", func(c *Config) { c.Secret = []byte("a\nb") }, "one line"},
		{"job id newline", func(c *Config) { c.JobID = "a\nb" }, "job id"},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, "timeout"},
		{"negative grace", func(c *Config) { c.Grace = -time.Second }, "grace"},
		{"bad master", func(c *Config) { c.MasterAddr = "a b" }, "master address"},
		{"bad port", func(c *Config) { c.MasterPort = 70000 }, "master port"},
		{"empty ssh", func(c *Config) { c.SSH = []string{""} }, "ssh command"},
	}
	for _, tc := range tests {
		c := ok
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want mention of %q", tc.name, err, tc.want)
		}
	}
	// Every problem is reported, not just the first.
	c := Config{NP: 0, Grace: -1}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "no command") || !strings.Contains(err.Error(), "grace") {
		t.Fatalf("Validate() = %v, want every problem", err)
	}
	// The timeout may come through Env when the field is unset.
	c = ok
	c.Env = []string{"RINGTAIL_TIMEOUT=2m", "X_1=a=b"}
	if err := c.Validate(); err != nil {
		t.Fatalf("Env with timeout and a value holding '=': %v", err)
	}
}

func TestRankEnv(t *testing.T) {
	j := jobEnv{World: 4, MasterAddr: "10.0.0.1", MasterPort: 29500, JobID: "j", Timeout: 90 * time.Second}
	got := strings.Join(rankEnv(j, placement{Rank: 3, LocalRank: 1, LocalWorld: 2}), " ")
	want := "RANK=3 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 WORLD_SIZE=4 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 RINGTAIL_JOB_ID=j RINGTAIL_COORDINATOR=external RINGTAIL_TIMEOUT=1m30s"
	if got != want {
		t.Fatalf("rankEnv = %s\nwant      %s", got, want)
	}
	j.Timeout = 0
	if got := strings.Join(rankEnv(j, placement{}), " "); strings.Contains(got, "RINGTAIL_TIMEOUT") {
		t.Fatalf("rankEnv without a timeout sets it: %s", got)
	}
}

func TestSecretAndJobIDAreRandom(t *testing.T) {
	a, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSecret()
	if len(a) != 64 || string(a) == string(b) || checkSecret(a) != nil {
		t.Fatalf("secrets %q, %q: want two different 64-hex-digit secrets", a, b)
	}
	x, _ := NewJobID()
	y, _ := NewJobID()
	if !strings.HasPrefix(x, "rt-") || len(x) != 19 || x == y {
		t.Fatalf("job ids %q, %q", x, y)
	}
}
