package actors

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "fano/pb" // registers the messages looked up below
)

// protoactorSystemMessages are protoactor's own lifecycle messages, the
// only non-fano types an actor may receive.
var protoactorSystemMessages = map[string]bool{
	"Started": true, "Stopping": true, "Stopped": true, "Restarting": true,
	"ReceiveTimeout": true, "Terminated": true,
	// protoactor's answer to a request whose target is gone (a pb message).
	"DeadLetterResponse": true,
}

// receiveCases lists, per actor (the receiver type of a Receive method in
// dir's non-test files), the types its message switch handles, as written
// ("*pb.Tick").
func receiveCases(t *testing.T, dir string) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	out := map[string][]string{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Name.Name != "Receive" || fn.Recv == nil || fn.Body == nil {
				continue
			}
			recv := exprString(src, fset, fn.Recv.List[0].Type)
			out[recv] = nil
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				ts, ok := n.(*ast.TypeSwitchStmt)
				if !ok {
					return true
				}
				for _, c := range ts.Body.List {
					for _, typ := range c.(*ast.CaseClause).List {
						out[recv] = append(out[recv], exprString(src, fset, typ))
					}
				}
				return true
			})
		}
	}
	return out
}

func exprString(src []byte, fset *token.FileSet, e ast.Expr) string {
	return string(src[fset.Position(e.Pos()).Offset:fset.Position(e.End()).Offset])
}

// nonPBMessages returns the cases that are neither a registered protobuf
// message of package fano/pb nor a protoactor system message.
func nonPBMessages(cases map[string][]string) []string {
	var bad []string
	for recv, types := range cases {
		for _, typ := range types {
			name, isPointer := strings.CutPrefix(typ, "*")
			pkg, msg, qualified := strings.Cut(name, ".")
			switch {
			case !isPointer || !qualified:
			case pkg == "actor" && protoactorSystemMessages[msg]:
				continue
			case pkg == "pb":
				if _, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName("fano.v1." + msg)); err == nil {
					continue
				}
			}
			bad = append(bad, recv+": "+typ)
		}
	}
	sort.Strings(bad)
	return bad
}

// Every message an actor handles is a protobuf message (or protoactor's
// own lifecycle message): what protoactor's remote can carry, so any actor
// can move to another machine.
func TestActorsReceiveOnlyProtobuf(t *testing.T) {
	cases := receiveCases(t, ".")
	for _, want := range []string{"*orchestrator", "*schedulerActor", "*allocatorActor", "*moduleHost", "*gatewayHost", "*executor"} {
		if len(cases[want]) == 0 {
			t.Errorf("no message switch found in %s.Receive: the walk no longer sees the actors", want)
		}
	}
	if bad := nonPBMessages(cases); len(bad) > 0 {
		t.Errorf("actors receive non-protobuf messages (define them in pb/actors.proto):\n  %s", strings.Join(bad, "\n  "))
	}
}

// The walk itself tells a struct from a pb message.
func TestNonPBMessagesFindsStructs(t *testing.T) {
	bad := nonPBMessages(map[string][]string{"*x": {
		"*pb.Tick", "*actor.Started", "*tick", "*pb.NoSuchMessage", "*actor.PoisonPill", "pb.Tick", "string",
	}})
	want := []string{"*x: *actor.PoisonPill", "*x: *pb.NoSuchMessage", "*x: *tick", "*x: pb.Tick", "*x: string"}
	if strings.Join(bad, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v, want %v", bad, want)
	}
}
