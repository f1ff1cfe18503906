// Package scrape reads a Prometheus metrics endpoint over HTTP, as
// Prometheus does, for bindkit's tests: the integration tests scrape the
// processes they run and check how metrics moved.
package scrape
