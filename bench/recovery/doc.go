// Package recovery is the harness behind `ringtail bench recovery`: it
// starts elastic ranks as processes (re-executing the binary, whose main or
// init calls RankMain first), kills one with SIGKILL once they train and
// measures how long the survivors take to step again on the re-formed
// ring (Run). The ranks are RunRank's: a model trained through
// elastic.Worker, one JSON RankEvent per step on stdout, which elastic's
// process tests read too. Only cmd/ and tests import it.
package recovery
