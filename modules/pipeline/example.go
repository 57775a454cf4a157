package pipeline

import (
	_ "embed"
	"slices"
)

//go:embed example/pipeline.yaml
var exampleDefinition []byte

//go:embed example/items.jsonl
var exampleItems []byte

// ExampleDefinition is the commented pipeline `fano pipeline init` writes.
func ExampleDefinition() []byte { return slices.Clone(exampleDefinition) }

// ExampleItems is the items file it reads.
func ExampleItems() []byte { return slices.Clone(exampleItems) }
