// Package configbinding runs ConfigBindings. It is
// examples/githubbinding's reconciler package plus the two options of
// wiring.New that Binding needs none of:
//
//   - SubResources, a SubResourcesReconciler (ConfigMapReconciler) that keeps one
//     ConfigMap per ConfigBinding, named ConfigMapName, owned by the
//     Binding, holding its spec.data, and deletes it when the Binding goes;
//   - WithContext, a callback (WithContext) that tells Do and Undo that
//     name, for the reconciler and the admission webhook alike.
package configbinding
