// Package docs holds the tests that keep bindkit's documents true to the
// code: ARCHITECTURE.md's package table against the module's packages and
// their imports, and the command blocks of README.md and of the package
// documentation run as written where they can run on a developer's
// machine (and otherwise checked as far as they can be: the files and
// objects they name exist, the make targets and go flags they use parse).
package docs
