package actors

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// maxSystemMethods bounds System's methods, exported and not: what is
// not the facade belongs to a type of its own (asker, desks, recovery,
// backendFaults, stateAccess, executorEnv, ...), one owner per fact.
const maxSystemMethods = 41

// facadeCallers names, for every exported method of System, a file
// outside actors/ that calls it. A method nobody outside calls is not
// facade: unexport it or move it to the type that owns its fact.
var facadeCallers = map[string]string{
	"Accepting":         "control/api.go",
	"BackendHealth":     "app/ops.go",
	"Backends":          "health/service.go",
	"Cancel":            "control/api.go",
	"Checkpoint":        "simulate/driver.go",
	"Clock":             "control/api.go",
	"Command":           "control/api.go",
	"Counts":            "control/metrics.go",
	"Deliver":           "modules/documenter/system_test.go",
	"Idle":              "app/main.go",
	"WaitingOnPerson":   "app/main.go",
	"Log":               "control/server.go",
	"Mailboxes":         "app/ops.go",
	"ModuleNames":       "control/server.go",
	"PauseBackend":      "cmd/fano/backend_cmd.go",
	"Publish":           "app/ops.go",
	"Query":             "control/api.go",
	"Quotas":            "control/api.go",
	"RecheckBackends":   "app/main.go",
	"ReconnectBackends": "app/ops.go",
	"Report":            "app/main.go",
	"Retry":             "control/retry.go",
	"Running":           "health/service.go",
	"SetAccepting":      "health/service.go",
	"Simulation":        "simulate/driver.go",
	"Stop":              "app/main.go",
	"StopStuckTask":     "app/ops.go",
	"StorageFault":      "control/api.go",
	"Submit":            "app/ops_health_test.go",
	"SubmitBatch":       "app/ops_service_test.go",
	"Subscribe":         "control/server.go",
	"Task":              "control/api.go",
	"Tasks":             "control/api.go",
	"Tick":              "app/ops_health_test.go",
	"WaitIdle":          "app/ops_service_test.go",
	"WithModule":        "cmd/fano/pipeline_run.go",
}

// actorsSource parses the package's non-test files.
func actorsSource(t *testing.T) (*token.FileSet, []*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return fset, files
}

// systemMethods lists the methods declared on System, with where.
func systemMethods(fset *token.FileSet, files []*ast.File) map[string]string {
	out := map[string]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
				continue
			}
			typ := fn.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			if id, ok := typ.(*ast.Ident); ok && id.Name == "System" {
				out[fn.Name.Name] = fset.Position(fn.Pos()).String()
			}
		}
	}
	return out
}

// System is the facade the CLI, app/, control/, health/ and simulate/
// use, and no more: a method added to it must name its caller outside
// actors/ here, and the whole stays small.
func TestSystemIsOnlyTheFacade(t *testing.T) {
	fset, files := actorsSource(t)
	methods := systemMethods(fset, files)
	if len(methods) > maxSystemMethods {
		var all []string
		for m := range methods {
			all = append(all, m)
		}
		sort.Strings(all)
		t.Errorf("System has %d methods, at most %d: move what is not the facade to the type that owns it\n%s",
			len(methods), maxSystemMethods, strings.Join(all, " "))
	}
	for name, at := range methods {
		if !ast.IsExported(name) {
			continue
		}
		caller, ok := facadeCallers[name]
		if !ok {
			t.Errorf("%s: System.%s is exported but not in facadeCallers: name its caller outside actors/, or unexport it", at, name)
			continue
		}
		src, err := os.ReadFile(filepath.Join("..", caller))
		if err != nil {
			t.Errorf("System.%s: its caller %s: %v", name, caller, err)
			continue
		}
		if !strings.Contains(string(src), "."+name+"(") {
			t.Errorf("System.%s: %s no longer calls it: name another caller, or unexport it", name, caller)
		}
	}
	for name := range facadeCallers {
		if _, ok := methods[name]; !ok {
			t.Errorf("facadeCallers names System.%s, which does not exist", name)
		}
	}
}

// The executor holds an executorEnv, never the System; and no actor code
// reaches into protoactor's private fields (mailbox depths are counted by
// mailbox middleware, see mailbox.go).
func TestExecutorHoldsNoSystemAndNoReflection(t *testing.T) {
	fset, files := actorsSource(t)
	for _, f := range files {
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "reflect" || p == "unsafe" {
				t.Errorf("%s imports %s", fset.Position(imp.Pos()), p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != "executor" {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return false
			}
			for _, field := range st.Fields.List {
				ast.Inspect(field.Type, func(n ast.Node) bool {
					if id, ok := n.(*ast.Ident); ok && id.Name == "System" {
						t.Errorf("%s: the executor holds a System; give it what it needs through executorEnv", fset.Position(field.Pos()))
					}
					return true
				})
			}
			return false
		})
	}
}
