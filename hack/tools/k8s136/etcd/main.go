// Command etcd is etcd's own server entry point, at the version the previous
// Kubernetes minor pins, built from the Go module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
