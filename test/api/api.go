package api

import (
	"bytes"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// Package is one package's exported API.
type Package struct {
	// Path is the package's import path.
	Path string
	// Lines are its exported declarations, sorted (see Lines).
	Lines []string
}

// Load returns the exported API of the packages patterns name (as go list
// takes them) in the module at dir, the packages with none left out. It
// runs `go list -export` there, which compiles what the build cache does
// not hold, and reads each package's export data with go/types.
func Load(dir string, keep func(importPath string) bool, patterns ...string) ([]Package, error) {
	listed, err := goList(dir, append([]string{"-f", "{{if ne .Name \"main\"}}{{.ImportPath}}{{end}}"}, patterns...)...)
	if err != nil {
		return nil, err
	}
	var targets []string
	for _, path := range listed {
		if path != "" && keep(path) {
			targets = append(targets, path)
		}
	}
	if len(targets) == 0 {
		return nil, nil
	}
	// Only what the API packages need is compiled: not the commands,
	// examples and rigs.
	exports := map[string]string{}
	lines, err := goList(dir, append([]string{"-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}, targets...)...)
	if err != nil {
		return nil, err
	}
	for _, l := range lines {
		if path, file, ok := strings.Cut(l, "\t"); ok && file != "" {
			exports[path] = file
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	var out []Package
	for _, path := range targets {
		pkg, err := imp.Import(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if l := Lines(pkg); len(l) > 0 {
			out = append(out, Package{Path: path, Lines: l})
		}
	}
	return out, nil
}

// goList runs go list with args in dir and returns its lines.
func goList(dir string, args ...string) ([]string, error) {
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s (in %s): %w\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n"), nil
}

// Lines are pkg's exported declarations, one a line, sorted, in the form
// Go's api files use (without their "pkg path, " prefix: one file is one
// package): "const X = 1", "const Y T = 2", "var V T", "func F(T) error",
// "type T struct", "type T struct, F int", "type T struct, embedded E",
// "type I interface, M(T) error", "method (*T) M() error", "type A = B".
// Types of other packages are named by their import path, parameters
// without their names: renaming a parameter or an import is no change.
func Lines(pkg *types.Package) []string {
	p := printer{pkg: pkg}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		if obj := scope.Lookup(name); obj.Exported() {
			p.object(obj)
		}
	}
	slices.Sort(p.lines)
	return slices.Compact(p.lines)
}

// printer collects the lines of one package.
type printer struct {
	pkg   *types.Package
	lines []string
}

func (p *printer) add(format string, args ...any) {
	p.lines = append(p.lines, fmt.Sprintf(format, args...))
}

// qualifier names the package's own types bare, others by import path.
func (p *printer) qualifier(other *types.Package) string {
	if other == p.pkg {
		return ""
	}
	return other.Path()
}

func (p *printer) typ(t types.Type) string { return types.TypeString(t, p.qualifier) }

func (p *printer) object(obj types.Object) {
	switch o := obj.(type) {
	case *types.Const:
		if b, ok := o.Type().(*types.Basic); ok && b.Info()&types.IsUntyped != 0 {
			p.add("const %s = %s", o.Name(), o.Val().ExactString())
		} else {
			p.add("const %s %s = %s", o.Name(), p.typ(o.Type()), o.Val().ExactString())
		}
	case *types.Var:
		p.add("var %s %s", o.Name(), p.typ(o.Type()))
	case *types.Func:
		sig := o.Type().(*types.Signature)
		p.add("func %s%s%s", o.Name(), p.typeParams(sig.TypeParams()), p.signature(sig))
	case *types.TypeName:
		p.typeName(o)
	}
}

// typeName adds a type's lines: the type, its exported fields or
// methods, its exported methods.
func (p *printer) typeName(o *types.TypeName) {
	if o.IsAlias() {
		p.add("type %s = %s", o.Name(), p.typ(types.Unalias(o.Type())))
		return
	}
	named, ok := o.Type().(*types.Named)
	if !ok {
		return
	}
	head := "type " + o.Name() + p.typeParams(named.TypeParams())
	switch u := named.Underlying().(type) {
	case *types.Struct:
		p.add("%s struct", head)
		for i := range u.NumFields() {
			f := u.Field(i)
			switch {
			case f.Embedded():
				p.add("%s struct, embedded %s", head, p.typ(f.Type()))
			case f.Exported():
				p.add("%s struct, %s %s", head, f.Name(), p.typ(f.Type()))
			}
		}
	case *types.Interface:
		if !u.IsMethodSet() {
			p.add("%s %s", head, p.typ(u)) // a constraint: its type set
			return
		}
		p.add("%s interface", head)
		for i := range u.NumMethods() {
			m := u.Method(i)
			if m.Exported() {
				p.add("%s interface, %s%s", head, m.Name(), p.signature(m.Type().(*types.Signature)))
			} else {
				p.add("%s interface, unexported methods", head)
			}
		}
	default:
		p.add("%s %s", head, p.typ(u))
	}
	for i := range named.NumMethods() {
		m := named.Method(i)
		if !m.Exported() {
			continue
		}
		sig := m.Type().(*types.Signature)
		recv := p.typ(sig.Recv().Type())
		p.add("method (%s) %s%s", recv, m.Name(), p.signature(sig))
	}
}

// typeParams formats a type parameter list with its constraints.
func (p *printer) typeParams(tps *types.TypeParamList) string {
	if tps.Len() == 0 {
		return ""
	}
	parts := make([]string, tps.Len())
	for i := range tps.Len() {
		tp := tps.At(i)
		parts[i] = tp.Obj().Name() + " " + p.typ(tp.Constraint())
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// signature formats a signature without parameter names:
// "(T, ...U) (V, error)".
func (p *printer) signature(sig *types.Signature) string {
	params := p.tuple(sig.Params(), sig.Variadic())
	switch res := sig.Results(); res.Len() {
	case 0:
		return "(" + params + ")"
	case 1:
		return "(" + params + ") " + p.typ(res.At(0).Type())
	default:
		return "(" + params + ") (" + p.tuple(res, false) + ")"
	}
}

func (p *printer) tuple(t *types.Tuple, variadic bool) string {
	parts := make([]string, t.Len())
	for i := range t.Len() {
		typ := t.At(i).Type()
		if variadic && i == t.Len()-1 {
			parts[i] = "..." + p.typ(typ.(*types.Slice).Elem())
			continue
		}
		parts[i] = p.typ(typ)
	}
	return strings.Join(parts, ", ")
}
