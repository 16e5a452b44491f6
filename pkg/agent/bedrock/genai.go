package bedrock

// GenAIModel implements agent.ModelDescriber: the agent's chat spans name
// the provider aws.bedrock and the model id (gen_ai.provider.name,
// gen_ai.request.model).
func (m *Model) GenAIModel() (provider, model string) { return "aws.bedrock", m.modelID }
