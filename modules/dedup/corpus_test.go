package dedup

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// corpus builds n synthetic insight-like statements: words drawn from a
// Zipf distribution over a vocabulary of mathematical and made-up words,
// 12 to 35 words long, so that common words are shared as in a real store
// of statements about one subject.
type corpus struct {
	r     *rand.Rand
	vocab []string
	zipf  *rand.Zipf
}

var mathWords = strings.Fields(`plane projective point line order group field finite fano
	incidence automorphism collineation desarguesian conic oval code hamming steiner triple system
	design matrix graph vertex edge bipartite cubic girth subspace vector dimension isomorphic unique
	exists prime power square theorem conjecture orthogonal latin affine parallel class dual
	symmetric transitive stabiliser subgroup simple nonabelian quartic surface genus coordinate
	division ring translation hall hughes difference set cyclic blocking colouring monochromatic`)

func newCorpus(seed uint64) *corpus {
	r := rand.New(rand.NewPCG(seed, seed*7+1))
	vocab := append([]string(nil), mathWords...)
	syll := []string{"ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "qu", "ba", "do", "fe", "gi", "ho"}
	for len(vocab) < 5000 {
		var b strings.Builder
		for range 2 + r.IntN(3) {
			b.WriteString(syll[r.IntN(len(syll))])
		}
		vocab = append(vocab, b.String())
	}
	return &corpus{r: r, vocab: vocab, zipf: rand.NewZipf(r, 1.1, 2, uint64(len(vocab)-1))}
}

func (c *corpus) text() string {
	n := 12 + c.r.IntN(24)
	w := make([]string, n)
	for i := range w {
		w[i] = c.vocab[c.zipf.Uint64()]
	}
	return strings.Join(w, " ") + "."
}

// variant rewords a text: about one word in ten replaced, one in twenty dropped.
func (c *corpus) variant(text string) string {
	words := strings.Fields(strings.TrimSuffix(text, "."))
	var out []string
	for _, w := range words {
		switch x := c.r.IntN(20); {
		case x == 0:
			continue
		case x <= 2:
			out = append(out, c.vocab[c.zipf.Uint64()])
		default:
			out = append(out, w)
		}
	}
	return strings.Join(out, " ") + "."
}

func (c *corpus) items(n int) []Item {
	out := make([]Item, n)
	for i := range out {
		out[i] = Item{ID: fmt.Sprintf("ins-%07d", i), Text: c.text(), Kind: "explorer/blessed"}
	}
	return out
}
