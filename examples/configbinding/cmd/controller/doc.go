// Command controller runs the ConfigBinding controller and its admission
// webhook in one process.
package main
