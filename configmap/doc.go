// Package configmap lets controllers react to ConfigMaps in the system
// namespace: a constructor registers observers on a Watcher for the names it
// cares about, and the process's main starts the watcher, which calls each
// observer with the current ConfigMap and again on every change.
package configmap
