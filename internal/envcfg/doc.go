// Package envcfg reads typed settings from environment variables and
// collects every malformed one, so a configuration reports all its
// problems at once (Reader, shared by the root package and elastic). Comm
// is a communicator's configuration behind ringtail.Config: read from the
// environment, validated, mapped to the engine's settings, and opened.
package envcfg
