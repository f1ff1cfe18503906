// Command controller runs the GithubBinding controller and its admission
// webhook in one process: see config/ to deploy it.
package main
