package main

import (
	"math/rand/v2"

	"fano/gateway"
	"fano/gateway/sim"
	"fano/modules"
	"fano/modules/pipeline"
)

// The pipeline module: `fano pipeline ...` (pipeline_cmd.go) sets
// pipelineModule before it builds the actor system; plain `fano run`
// never has one.
func init() {
	extraCommands = append(extraCommands, newPipelineCmd)
	moduleFactories = append(moduleFactories, func(*moduleEnv) (modules.Module, error) {
		if pipelineModule == nil {
			return nil, nil
		}
		return pipelineModule, nil
	})
	sim.RegisterFormat(pipeline.TaskType, func(req gateway.Request, r *rand.Rand, _ string) string {
		return pipeline.SimAnswer(req.Prompt, r)
	})
}

var pipelineModule *pipeline.Module
