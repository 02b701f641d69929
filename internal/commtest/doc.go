// Package commtest starts communicators inside one test process, over the
// real transports, for the tests of packages built on the root package.
// (The root package's own tests keep their copy: importing this from there
// would be a cycle.) It must only be imported by _test.go files.
package commtest
