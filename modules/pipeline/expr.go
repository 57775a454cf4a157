package pipeline

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
)

// compiledExpr is an expression step or a validation rule, checked at load
// time against the variables it may use.
type compiledExpr struct {
	src  string
	prog *vm.Program
}

// exprEnv is what an expression sees: the item, its key, the outputs of
// the steps it needs, the answer being validated (rules only), and
// randomness seeded by (pipeline seed, item, step) so a rerun computes the
// same value.
func exprEnv(item map[string]any, key string, steps map[string]any, output any, r *rand.Rand) map[string]any {
	return map[string]any{
		"item":   item,
		"key":    key,
		"steps":  steps,
		"output": output,
		"rand":   func() float64 { return r.Float64() },
		"randint": func(lo, hi int) int {
			if hi <= lo {
				return lo
			}
			return lo + r.IntN(hi-lo+1)
		},
		"choice": func(xs []any) any {
			if len(xs) == 0 {
				return nil
			}
			return xs[r.IntN(len(xs))]
		},
		"shuffle": func(xs []any) []any {
			out := append([]any(nil), xs...)
			r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
			return out
		},
	}
}

func compileExpr(src string, d *Definition, s *Step, rule bool) (*compiledExpr, error) {
	// Answers are objects: rules read output.field (typed any).
	env := exprEnv(map[string]any{}, "", map[string]any{}, map[string]any{}, nil)
	if !rule {
		delete(env, "output")
	}
	opts := []expr.Option{expr.Env(env)}
	if rule {
		opts = append(opts, expr.AsBool())
	}
	prog, err := expr.Compile(src, opts...)
	if err != nil {
		msg, _, _ := strings.Cut(err.Error(), "\n") // one line: the position is in it
		return nil, errors.New(msg)
	}
	for _, ref := range stepRefs(src) {
		if err := checkRef(d, s, ref); err != nil {
			return nil, err
		}
	}
	return &compiledExpr{src: src, prog: prog}, nil
}

// seededRand is the randomness of one (item, step).
func seededRand(seed int64, key, step string) *rand.Rand {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s\x00%s", seed, key, step)
	v := h.Sum64()
	return rand.New(rand.NewPCG(v, v^0x9e3779b97f4a7c15))
}

func (c *compiledExpr) eval(env map[string]any) (any, error) {
	return expr.Run(c.prog, env)
}
