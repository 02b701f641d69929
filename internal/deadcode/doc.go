// Command deadcode lists ringtail's functions that nothing calls: the check
// behind "no code without a caller" (deadcode_test.go runs it over the
// module). It is golang.org/x/tools/cmd/deadcode's analysis (Rapid Type
// Analysis over the SSA form of the whole program) with ringtail's rules
// for what counts as a caller:
//
//   - a production caller: anything reachable from the main packages (the
//     commands, the tools, the C ABI's library), from the functions the C
//     ABI exports to C (//export), from the exported API of the root
//     package (its users call it) and of examples/ (code users call and
//     copy);
//   - a test of another package: a function that the tests of a package
//     other than its own reach is the API of a test helper (the in-memory
//     transport twin, internal/commtest, plan.Simulate the builders'
//     tests check against), which is what it is for.
//
// So a function whose only callers are its own package's tests is dead:
// tested code that nothing uses. Exported or not makes no difference
// outside the root package and examples/. One blind spot, RTA's: an
// exported method of a type that becomes an interface value anywhere
// counts as reachable, since reflection could call it.
//
// Usage, from the module root:
//
//	go run ./internal/deadcode [packages]   (default ./...)
//
// It prints one line per dead function, file:line: package.Function, and
// exits 1 if there is any that the allow-list below does not excuse, or an
// allow-list entry that is no longer dead.
package main
