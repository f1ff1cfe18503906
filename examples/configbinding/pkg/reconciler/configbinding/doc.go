// Package configbinding runs ConfigBindings. It is
// examples/githubbinding's reconciler package plus the two hooks of
// psbinding.BaseReconciler that Binding needs none of:
//
//   - a SubResourcesReconciler (ConfigMapReconciler) that keeps one
//     ConfigMap per ConfigBinding, named ConfigMapName, owned by the
//     Binding, holding its spec.data, and deletes it when the Binding goes;
//   - a WithContext callback (WithContext) that tells Do and Undo that
//     name, for the reconciler and the admission webhook alike.
package configbinding
