package sim

import "strings"

// Fact is one item of the sim's small body of knowledge about finite
// projective planes. Answers are assembled from facts, so whatever a sim
// backend says is at least true.
type Fact struct {
	ID       string
	Topic    string   // short noun phrase: "the automorphism group of the Fano plane"
	Keywords []string // lower case words or phrases matched against prompts
	Tags     []string // tags for extracted insights
	Claim    string   // one atomic, self-contained statement
	Detail   string   // a sentence of context that follows the claim in prose
	Question string   // an open question the fact suggests
}

// facts is the built-in body of knowledge. Keep claims atomic and true.
var facts = []Fact{
	{
		ID: "fano-size", Topic: "the size of the Fano plane",
		Keywords: []string{"fano", "seven", "7 points", "7 lines", "smallest", "size"},
		Tags:     []string{"fano-plane", "counting"},
		Claim:    "The Fano plane has exactly 7 points and 7 lines.",
		Detail:   "It is the smallest projective plane: no plane with fewer points satisfies the axioms.",
		Question: "Which properties of the Fano plane are forced purely by its having 7 points and 7 lines?",
	},
	{
		ID: "fano-regular", Topic: "incidence in the Fano plane",
		Keywords: []string{"incidence", "incident", "three", "3 points", "per line", "per point", "regular"},
		Tags:     []string{"fano-plane", "incidence"},
		Claim:    "Every line of the Fano plane contains exactly 3 points and every point lies on exactly 3 lines.",
		Detail:   "This makes the Fano plane a symmetric configuration of type $(7_3)$, with 21 incident point-line pairs.",
		Question: "Is the Fano plane the only symmetric (7_3) configuration up to isomorphism, and how short is a proof?",
	},
	{
		ID: "two-points", Topic: "the incidence axioms",
		Keywords: []string{"axiom", "axioms", "two points", "two lines", "meet", "intersect", "unique line", "exactly one"},
		Tags:     []string{"axioms", "incidence"},
		Claim:    "In a projective plane any two distinct points lie on exactly one common line, and any two distinct lines meet in exactly one point.",
		Detail:   "Together with a non-degeneracy condition (four points, no three collinear) these are the axioms of a projective plane; there are no parallel lines.",
		Question: "Which of the projective plane axioms can be weakened while still forcing the Fano plane when there are 7 points?",
	},
	{
		ID: "aut-group", Topic: "the automorphism group of the Fano plane",
		Keywords: []string{"automorphism", "automorphisms", "symmetry", "symmetries", "group", "psl", "gl 3 2", "168", "collineation group"},
		Tags:     []string{"group-theory", "symmetry", "fano-plane"},
		Claim:    "The automorphism group of the Fano plane is PSL(2,7), isomorphic to GL(3,2), and has order 168.",
		Detail:   "It acts transitively on points, on lines and on flags, and the stabiliser of a point has order 24 and is isomorphic to S4.",
		Question: "How does the action of PSL(2,7) on the 7 points relate to its action on the 8 points of the projective line over GF(7)?",
	},
	{
		ID: "simple-group", Topic: "the simplicity of PSL(2,7)",
		Keywords: []string{"simple group", "simple", "nonabelian", "psl", "168", "klein quartic"},
		Tags:     []string{"group-theory"},
		Claim:    "PSL(2,7), of order 168, is the second smallest nonabelian simple group, after A5 of order 60.",
		Detail:   "The same group is the symmetry group of the Klein quartic, which ties the Fano plane to Riemann surfaces of genus 3.",
		Question: "Can the simplicity of PSL(2,7) be proved using only the combinatorics of the Fano plane?",
	},
	{
		ID: "self-dual", Topic: "duality in the Fano plane",
		Keywords: []string{"dual", "duality", "self dual", "polarity", "points and lines", "exchange"},
		Tags:     []string{"duality", "fano-plane"},
		Claim:    "The Fano plane is self-dual: exchanging the roles of points and lines yields an isomorphic plane.",
		Detail:   "More generally, the dual of any projective plane is again a projective plane, so every theorem has a dual theorem obtained by swapping points and lines.",
		Question: "Which polarities of the Fano plane exist, and how many absolute points does each have?",
	},
	{
		ID: "pg22", Topic: "the Fano plane as PG(2,2)",
		Keywords: []string{"gf 2", "f2", "field", "vector", "vectors", "subspace", "subspaces", "coordinates", "pg 2 2", "binary"},
		Tags:     []string{"finite-geometry", "linear-algebra"},
		Claim:    "The Fano plane is PG(2,2), the projective plane over GF(2): its points are the 7 nonzero vectors of $\\mathrm{GF}(2)^3$ and its lines are the 2-dimensional subspaces.",
		Detail:   "Three nonzero vectors form a line exactly when they sum to zero, which gives a one-line test for collinearity.",
		Question: "Which statements about PG(2,2) extend verbatim to PG(2,q), and which depend on the field having characteristic 2?",
	},
	{
		ID: "steiner", Topic: "Steiner triple systems",
		Keywords: []string{"steiner", "triple", "triples", "design", "designs", "block", "blocks", "sts", "s 2 3 7"},
		Tags:     []string{"design-theory", "combinatorics"},
		Claim:    "The lines of the Fano plane form the Steiner triple system S(2,3,7), which is unique up to isomorphism.",
		Detail:   "A Steiner triple system on v points exists exactly when v is 1 or 3 mod 6, and v = 7 is the smallest nontrivial case.",
		Question: "How many distinct (labelled) Fano planes live on a fixed 7-element set, and how does that count follow from the order of the automorphism group?",
	},
	{
		ID: "hamming", Topic: "the Hamming code",
		Keywords: []string{"hamming", "code", "codes", "codeword", "codewords", "error correcting", "coding", "weight"},
		Tags:     []string{"coding-theory"},
		Claim:    "The 7 codewords of weight 3 in the binary Hamming [7,4,3] code are exactly the incidence vectors of the lines of the Fano plane.",
		Detail:   "The Hamming code is perfect and corrects one error; its 16 codewords are the zero word, the 7 lines, their 7 complements and the all-ones word.",
		Question: "Which other perfect or near-perfect codes arise from incidence structures of larger projective planes?",
	},
	{
		ID: "octonions", Topic: "octonion multiplication",
		Keywords: []string{"octonion", "octonions", "multiplication", "imaginary", "cayley", "division algebra", "quaternion"},
		Tags:     []string{"algebra", "octonions"},
		Claim:    "The multiplication table of the 7 imaginary octonion units is encoded by an oriented Fano plane: each line, read cyclically, gives a quaternion-like triple.",
		Detail:   "Each of the 7 lines spans a copy of the quaternions inside the octonions, and reversing an orientation flips the sign of the corresponding products.",
		Question: "Which orientations of the Fano plane's lines give algebras isomorphic to the octonions?",
	},
	{
		ID: "order-count", Topic: "planes of order n",
		Keywords: []string{"order n", "order", "n 2 n 1", "number of points", "count", "counting", "n 1 points"},
		Tags:     []string{"counting", "projective-planes"},
		Claim:    "A projective plane of order n has $n^2+n+1$ points and $n^2+n+1$ lines, with $n+1$ points on each line and $n+1$ lines through each point.",
		Detail:   "The Fano plane is the case $n = 2$; the counting follows from fixing a point and noting that every other point lies on exactly one line through it.",
		Question: "Which further counting identities hold in every plane of order n, and which can distinguish non-isomorphic planes?",
	},
	{
		ID: "bruck-ryser", Topic: "the Bruck–Ryser theorem",
		Keywords: []string{"bruck", "ryser", "chowla", "sum of two squares", "existence", "nonexistence", "mod 4"},
		Tags:     []string{"existence", "number-theory"},
		Claim:    "Bruck–Ryser theorem: if a projective plane of order n exists and n is congruent to 1 or 2 mod 4, then n is a sum of two integer squares.",
		Detail:   "It rules out infinitely many orders, such as 6, 14, 21 and 22, but says nothing about orders like 10 or 12.",
		Question: "Is there a strengthening of Bruck–Ryser that would settle order 12 without a computer search?",
	},
	{
		ID: "no-order-6", Topic: "the nonexistence of a plane of order 6",
		Keywords: []string{"order 6", "six", "euler", "officers", "tarry", "36"},
		Tags:     []string{"existence", "latin-squares"},
		Claim:    "There is no projective plane of order 6.",
		Detail:   "This follows from Bruck–Ryser since 6 is 2 mod 4 and not a sum of two squares; it also follows from Tarry's 1900 proof that Euler's 36 officers problem has no solution.",
		Question: "What is the shortest self-contained proof that no plane of order 6 exists?",
	},
	{
		ID: "order-10", Topic: "the nonexistence of a plane of order 10",
		Keywords: []string{"order 10", "ten", "lam", "computer search", "computer", "swiercz", "thiel"},
		Tags:     []string{"existence", "computation"},
		Claim:    "There is no projective plane of order 10; this was established by the computer search of Lam, Thiel and Swiercz completed in 1989.",
		Detail:   "The search built on MacWilliams, Sloane and Thompson's analysis of the plane's binary code and took thousands of hours on a Cray; later independent SAT-based verifications have confirmed the result.",
		Question: "Can the order-10 result be given a fully verifiable certificate small enough to check by hand-written proof assistant code?",
	},
	{
		ID: "prime-power", Topic: "the prime power conjecture",
		Keywords: []string{"prime power", "prime powers", "conjecture", "open problem", "order 12", "12", "known orders"},
		Tags:     []string{"existence", "open-problems"},
		Claim:    "Every known finite projective plane has prime power order, and whether a plane of non-prime-power order exists is open; the smallest unsettled order is 12.",
		Detail:   "For every prime power q the Desarguesian plane PG(2,q) exists, so the open question is only about the other orders.",
		Question: "What is the strongest known partial result towards ruling out a projective plane of order 12?",
	},
	{
		ID: "desarguesian", Topic: "Desarguesian planes",
		Keywords: []string{"desargues", "desarguesian", "division ring", "coordinatize", "coordinatise", "coordinatization", "wedderburn", "skew field"},
		Tags:     []string{"foundations", "finite-geometry"},
		Claim:    "A projective plane satisfies Desargues' theorem exactly when it can be coordinatized by a division ring; by Wedderburn's theorem a finite Desarguesian plane is PG(2,q) over a finite field.",
		Detail:   "Weaker configurational conditions correspond to weaker algebraic structures such as alternative division rings, quasifields and planar ternary rings.",
		Question: "Which finite non-Desarguesian planes still satisfy the little Desargues theorem for some lines?",
	},
	{
		ID: "order-9", Topic: "non-Desarguesian planes of order 9",
		Keywords: []string{"non desarguesian", "order 9", "nine", "hall plane", "hughes", "translation plane"},
		Tags:     []string{"classification", "non-desarguesian"},
		Claim:    "The smallest non-Desarguesian projective planes have order 9; up to isomorphism there are exactly four planes of order 9: the Desarguesian one, the Hall plane, its dual and the Hughes plane.",
		Detail:   "The classification of order 9 was completed by computer by Lam, Kolesova and Thiel in 1991.",
		Question: "What invariant most cheaply distinguishes the four projective planes of order 9?",
	},
	{
		ID: "small-unique", Topic: "planes of small order",
		Keywords: []string{"unique", "uniqueness", "small orders", "order 3", "order 4", "order 5", "order 7", "order 8", "classification"},
		Tags:     []string{"classification"},
		Claim:    "The projective planes of orders 2, 3, 4, 5, 7 and 8 are unique up to isomorphism, and each is Desarguesian.",
		Detail:   "Uniqueness for the smallest orders can be checked by hand, while order 8 needed a computer-assisted classification.",
		Question: "Is there a uniform argument for the uniqueness of the planes of orders 2 through 5?",
	},
	{
		ID: "incidence-matrix", Topic: "incidence matrices",
		Keywords: []string{"incidence matrix", "matrix", "matrices", "determinant", "eigenvalue", "eigenvalues", "rank", "circulant"},
		Tags:     []string{"linear-algebra", "incidence"},
		Claim:    "The incidence matrix A of a projective plane of order n satisfies $AA^T = nI + J$, where $J$ is the all-ones matrix; for the Fano plane, $AA^T = 2I + J$.",
		Detail:   "So $AA^T$ has eigenvalue $(n+1)^2$ once and $n$ with multiplicity $n^2+n$, giving $\\det(A)^2 = (n+1)^2 n^{n^2+n}$; the rational congruence of $nI + J$ to the identity is the heart of the Bruck–Ryser proof.",
		Question: "What is the rank of the Fano plane's incidence matrix over GF(2), and how does that generalise to PG(2,2^k)?",
	},
	{
		ID: "heawood", Topic: "the Heawood graph",
		Keywords: []string{"heawood", "levi", "levi graph", "graph", "graphs", "bipartite", "girth", "cubic", "torus"},
		Tags:     []string{"graph-theory"},
		Claim:    "The Levi (incidence) graph of the Fano plane is the Heawood graph: a bipartite cubic graph with 14 vertices, 21 edges and girth 6.",
		Detail:   "It is the unique (3,6)-cage, and on the torus it is the edge graph of Heawood's map of 7 mutually adjacent hexagons, whose dual is K7.",
		Question: "Which automorphisms of the Heawood graph swap the two colour classes, and what do they correspond to in the Fano plane?",
	},
	{
		ID: "difference-set", Topic: "cyclic difference sets",
		Keywords: []string{"difference set", "difference", "cyclic", "singer", "mod 7", "0 1 3"},
		Tags:     []string{"design-theory", "number-theory"},
		Claim:    "The set {0, 1, 3} is a perfect difference set modulo 7, and its 7 translates are the lines of a cyclic model of the Fano plane.",
		Detail:   "Singer's theorem gives such a cyclic model for every Desarguesian plane PG(2,q), with a difference set of size $q+1$ modulo $q^2+q+1$.",
		Question: "Does every planar difference set come from a Desarguesian plane, as is conjectured for cyclic planes?",
	},
	{
		ID: "collineations", Topic: "collineations of Desarguesian planes",
		Keywords: []string{"collineation", "collineations", "fundamental theorem", "pgl", "semilinear", "projectivity", "projectivities"},
		Tags:     []string{"group-theory", "finite-geometry"},
		Claim:    "The collineation group of the Desarguesian plane PG(2,q), with $q = p^h$, is $\\mathrm{P\\Gamma L}(3,q)$, of order $h\\,q^3(q^3-1)(q^2-1)$.",
		Detail:   "This is the fundamental theorem of projective geometry; for q = 2 it gives 168, the order of the Fano plane's automorphism group.",
		Question: "For which q does PΓL(3,q) act transitively on the ordered quadrangles of PG(2,q), and what fails otherwise?",
	},
	{
		ID: "real-drawing", Topic: "drawing the Fano plane",
		Keywords: []string{"draw", "drawing", "picture", "real plane", "euclidean", "circle", "diagonal", "quadrangle", "fano s axiom", "characteristic"},
		Tags:     []string{"foundations", "fano-plane"},
		Claim:    "The Fano plane cannot be realised with straight lines in the real projective plane: in any drawing at least one line must be curved, usually shown as a circle.",
		Detail:   "The obstruction is Fano's axiom: in the Fano plane the three diagonal points of a complete quadrangle are collinear, which happens in a Desarguesian plane exactly when the field has characteristic 2.",
		Question: "Which other small configurations are, like the Fano plane, not realisable over the reals but realisable over some finite field?",
	},
	{
		ID: "latin-squares", Topic: "mutually orthogonal Latin squares",
		Keywords: []string{"latin square", "latin squares", "mols", "orthogonal", "net", "nets"},
		Tags:     []string{"latin-squares", "combinatorics"},
		Claim:    "A projective plane of order n exists if and only if there is a complete set of n−1 mutually orthogonal Latin squares of order n.",
		Detail:   "The correspondence goes through the affine plane: its parallel classes, beyond two used as coordinates, each define one Latin square.",
		Question: "How large can a set of mutually orthogonal Latin squares of order 10 or 12 be, and what does that say about planes of those orders?",
	},
	{
		ID: "affine", Topic: "affine planes",
		Keywords: []string{"affine", "affine plane", "parallel", "parallel class", "remove a line", "line at infinity"},
		Tags:     []string{"finite-geometry"},
		Claim:    "Deleting one line and its points from a projective plane of order n leaves an affine plane of order n, with $n^2$ points and $n^2+n$ lines in $n+1$ parallel classes.",
		Detail:   "For the Fano plane this gives the affine plane of order 2: 4 points and 6 lines, the complete graph K4 viewed as a geometry.",
		Question: "When do two different deleted lines of the same projective plane give non-isomorphic affine planes?",
	},
	{
		ID: "ovals", Topic: "ovals and conics",
		Keywords: []string{"oval", "ovals", "conic", "conics", "segre", "arc", "arcs", "hyperoval", "nucleus"},
		Tags:     []string{"finite-geometry", "arcs"},
		Claim:    "Segre's theorem: in the Desarguesian plane PG(2,q) with q odd, every oval (a set of $q+1$ points, no three collinear) is a conic.",
		Detail:   "For q even all tangents of an oval pass through one point, the nucleus, so ovals extend to hyperovals; in the Fano plane the hyperovals are the complements of lines.",
		Question: "How many hyperovals does the Fano plane contain, and how does the automorphism group act on them?",
	},
	{
		ID: "two-colouring", Topic: "colourings of the Fano plane",
		Keywords: []string{"colour", "color", "colouring", "coloring", "2 colouring", "property b", "hypergraph", "chromatic", "monochromatic"},
		Tags:     []string{"combinatorics", "hypergraphs"},
		Claim:    "The Fano plane is not 2-colourable: every colouring of its 7 points with two colours leaves some line monochromatic.",
		Detail:   "As a 3-uniform hypergraph it is the smallest one without Property B, and it is the extremal example in Turán-type problems for 3-graphs.",
		Question: "What is the maximum number of edges in a 3-uniform hypergraph on n vertices with no copy of the Fano plane?",
	},
	{
		ID: "blocking", Topic: "blocking sets",
		Keywords: []string{"blocking set", "blocking sets", "block every line", "meets every line", "covering"},
		Tags:     []string{"finite-geometry", "extremal"},
		Claim:    "A blocking set of a projective plane meets every line but contains no line, and the Fano plane has no blocking set at all.",
		Detail:   "In PG(2,q) a nontrivial blocking set has at least $q+\\sqrt{q}+1$ points, with equality for Baer subplanes when q is a square.",
		Question: "How close is the best lower bound for the size of a blocking set in PG(2,p), p prime, to the smallest known examples?",
	},
}

// Facts returns a copy of the built-in facts, for formats registered from
// outside the package.
func Facts() []Fact {
	out := make([]Fact, len(facts))
	copy(out, facts)
	return out
}

// keywordIndex holds, for each fact, its keywords normalised like prompts
// and padded with spaces so that matching is whole-word.
var keywordIndex = func() [][]string {
	idx := make([][]string, len(facts))
	for i, f := range facts {
		for _, k := range f.Keywords {
			idx[i] = append(idx[i], " "+normalize(k)+" ")
		}
	}
	return idx
}()

// normalize lower-cases s and turns every run of characters other than
// ASCII letters and digits into one space, trimmed at both ends.
func normalize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := true
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			space = false
			continue
		}
		if !space {
			b.WriteByte(' ')
			space = true
		}
	}
	return strings.TrimSuffix(b.String(), " ")
}
