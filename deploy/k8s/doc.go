// Package k8s holds the Kubernetes recipe for a ringtail job (the manifests
// in this directory) and, in its tests, the checks that keep the recipe
// true without a cluster: the manifests decode strictly into the upstream
// API types and give each pod the environment of a valid rank.
package k8s
