// Package scrape reads a Prometheus metrics endpoint as Prometheus does,
// for bindkit's tests: the integration tests scrape the processes they
// run and check how metrics moved. A process serves its metrics over
// HTTPS to callers with a bearer token allowed to get /metrics by
// default (GetWithToken), over plain HTTP with --metrics-secure=false
// (Get).
package scrape
