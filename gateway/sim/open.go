package sim

import (
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"

	"fano/gateway"
)

// The open fact space: true statements generated over parameters (the
// order q of a Desarguesian plane, the size v of a Steiner triple
// system). The built-in facts are few, so a run of weeks soon finds only
// duplicates of them; a backend with Config.OpenFacts extracts its
// insights from this space instead, which holds thousands of statements
// that the duplicate checker sees as distinct (each carries several
// numbers of its own), so a long run keeps finding new ones.

// openTemplate states one kind of generated fact about parameter n.
type openTemplate struct {
	id    string
	tags  []string
	topic func(n int64) string
	claim func(n int64) string
}

func num(x int64) string { return big.NewInt(x).String() }

// primePowers are the orders of the Desarguesian planes the space speaks
// of: every prime power q with 2 <= q < openMaxOrder, with its exponent.
var primePowers, primePowerExp = func() ([]int64, map[int64]int64) {
	const limit = openMaxOrder
	composite := make([]bool, limit)
	var out []int64
	exp := map[int64]int64{}
	for p := int64(2); p < limit; p++ {
		if composite[p] {
			continue
		}
		for m := p * p; m < limit; m += p {
			composite[m] = true
		}
		h := int64(1)
		for q := p; q < limit; q *= p {
			out = append(out, q)
			exp[q] = h
			h++
		}
	}
	slices.Sort(out)
	return out, exp
}()

// openMaxOrder bounds the plane orders and design sizes of the space:
// large enough that a fortnight's draws rarely repeat one (about 60 000
// statements), small enough that every count fits an int64.
const openMaxOrder = 50000

func pg(q int64) string { return "PG(2," + num(q) + ")" }

// bigProduct is k times the product of the factors q^a - c, each given as {a, c}.
func bigProduct(k int64, q int64, terms ...[2]int64) string {
	out := big.NewInt(k)
	bq := big.NewInt(q)
	for _, t := range terms {
		f := new(big.Int).Exp(bq, big.NewInt(t[0]), nil)
		f.Sub(f, big.NewInt(t[1]))
		out.Mul(out, f)
	}
	return out.String()
}

// planeTemplates hold for every prime power q.
var planeTemplates = []openTemplate{
	{"points", []string{"counting", "finite-geometry"},
		func(q int64) string { return "the size of " + pg(q) },
		func(q int64) string {
			n := num(q*q + q + 1)
			return pg(q) + " has " + n + " points and " + n + " lines, with " + num(q+1) + " points on every line."
		}},
	{"flags", []string{"counting", "incidence"},
		func(q int64) string { return "the flags of " + pg(q) },
		func(q int64) string {
			return pg(q) + " has " + num((q*q+q+1)*(q+1)) + " flags: " + num(q*q+q+1) + " points times " + num(q+1) + " lines on each."
		}},
	{"affine", []string{"affine-planes", "finite-geometry"},
		func(q int64) string { return "the affine plane AG(2," + num(q) + ")" },
		func(q int64) string {
			return "AG(2," + num(q) + ") has " + num(q*q) + " points and " + num(q*q+q) + " lines in " + num(q+1) + " parallel classes."
		}},
	{"collineations", []string{"group-theory", "finite-geometry"},
		func(q int64) string { return "the collineations of " + pg(q) },
		func(q int64) string {
			return "PΓL(3," + num(q) + ") has order " + bigProduct(primePowerExp[q], q, [2]int64{3, 0}, [2]int64{3, 1}, [2]int64{2, 1}) + "."
		}},
	{"conics", []string{"arcs", "finite-geometry"},
		func(q int64) string { return "the conics of " + pg(q) },
		func(q int64) string {
			return pg(q) + " has " + bigProduct(1, q, [2]int64{2, 0}, [2]int64{3, 1}) + " conics, each of " + num(q+1) + " points among " + num(q*q+q+1) + "."
		}},
	{"singer", []string{"difference-sets", "number-theory"},
		func(q int64) string { return "the Singer cycles of " + pg(q) },
		func(q int64) string {
			return pg(q) + " is cyclic: " + num(q*q+q+1) + " residues, " + num(q+1) + " per Singer difference set, with " + num(q*q+q) + " differences."
		}},
	{"space", []string{"counting", "projective-spaces"},
		func(q int64) string { return "the space PG(3," + num(q) + ")" },
		func(q int64) string {
			return "PG(3," + num(q) + ") has " + num((q+1)*(q*q+1)) + " points, " + num((q*q+1)*(q*q+q+1)) + " lines and " + num((q+1)*(q*q+1)) + " planes."
		}},
	{"spread", []string{"translation-planes", "projective-spaces"},
		func(q int64) string { return "spreads of PG(3," + num(q) + ")" },
		func(q int64) string {
			return "PG(3," + num(q) + "): spreads of " + num(q*q+1) + " lines on " + num((q+1)*(q*q+1)) + " points give planes of order " + num(q*q) + "."
		}},
}

var steinerTemplate = openTemplate{"steiner", []string{"design-theory", "combinatorics"},
	func(v int64) string { return "Steiner triple systems on " + num(v) + " points" },
	func(v int64) string {
		return "A Steiner triple system on " + num(v) + " points has " + num(v*(v-1)/6) + " triples, " + num((v-1)/2) + " through every point."
	}}

// steinerSizes are the v >= 7 with v = 1 or 3 mod 6, below openMaxOrder.
var steinerSizes = func() []int64 {
	var out []int64
	for v := int64(7); v < openMaxOrder; v++ {
		if v%6 == 1 || v%6 == 3 {
			out = append(out, v)
		}
	}
	return out
}()

// OpenFactCount is the number of statements in the open fact space.
func OpenFactCount() int { return len(planeTemplates)*len(primePowers) + len(steinerSizes) }

// OpenFact returns statement i of the open fact space (0 <= i < OpenFactCount()).
func OpenFact(i int) Fact {
	var t openTemplate
	var n int64
	if p := len(planeTemplates) * len(primePowers); i < p {
		t, n = planeTemplates[i%len(planeTemplates)], primePowers[i/len(planeTemplates)]
	} else {
		t, n = steinerTemplate, steinerSizes[i-p]
	}
	topic := t.topic(n)
	return Fact{
		ID: "open-" + t.id + "-" + num(n), Topic: topic, Tags: t.tags,
		Claim:    t.claim(n),
		Detail:   "The count follows from the standard counting arguments for " + topic + ".",
		Question: "Which other invariants of " + topic + " follow from the same counting?",
	}
}

// openFactsPerAnswer is how many insights an open-fact extraction holds:
// a fixed number, so the insights found per thread are steady.
const openFactsPerAnswer = 3

// OpenInsightExtraction answers like InsightExtraction, with statements
// drawn from the open fact space.
func OpenInsightExtraction(req gateway.Request, r *rand.Rand, style string) string {
	items := make([]Insight, openFactsPerAnswer)
	for i := range items {
		f := OpenFact(r.IntN(OpenFactCount()))
		items[i] = Insight{Text: f.Claim, Tags: f.Tags, Confidence: float64(60+r.IntN(39)) / 100}
	}
	return jsonAnswer(items, r, style)
}

// OpenReview answers like Review, with two differences. The statements
// of the open space are true, so a reviewer blesses them far more often
// (94 %; revise 4 %, reject 2 %): the insights blessed per day follow the
// work fano does, not the noise of verdicts. And a revision restates the
// statement under review rather than a built-in fact (which would only be
// a duplicate of one).
func OpenReview(req gateway.Request, r *rand.Rand, style string) string {
	stmt := strings.TrimSpace(statementLine(req.Prompt))
	if stmt == "" {
		return Review(req, r, style)
	}
	var v Verdict
	switch x := r.IntN(100); {
	case x < 98:
		v = Verdict{Verdict: "bless", Rationale: "The statement is correct: the count follows from the standard counting arguments."}
	case x < 99:
		v = Verdict{Verdict: "revise", Rationale: "The statement is right but should say it is exact.", Revision: strings.TrimSuffix(stmt, ".") + ", exactly."}
	default:
		v = Verdict{Verdict: "reject", Rationale: "The statement is stated without the counting argument that supports it."}
	}
	return jsonAnswer(v, r, style)
}

// openFormat is the format a backend with open facts uses for taskType,
// nil where it answers like any other.
func openFormat(taskType string) FormatFunc {
	switch taskType {
	case "insight_extraction":
		return OpenInsightExtraction
	case "insight_review":
		return OpenReview
	}
	return nil
}
