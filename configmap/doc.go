// Package configmap lets controllers react to ConfigMaps in the system
// namespace: a constructor registers observers on a Watcher for the names it
// cares about, and the process's main starts the watcher, which calls each
// observer with the current ConfigMap and again on every change.
//
// Two Watchers are provided. InformedWatcher is what a process runs: one
// informer on the ConfigMaps of one namespace, started by Start once every
// constructor has registered its observers. StaticWatcher serves fixed
// ConfigMaps to the observers of a unit test, at once and without a client.
//
// A ConfigMap that does not exist is reported to its observers as nil, so an
// observer falls back to its defaults instead of waiting for a ConfigMap an
// operator may never create; deleting a ConfigMap reports nil again.
package configmap
