package pb

// IDs lists the tasks a TaskForgotten takes out of memory: task_id, then
// more_task_ids.
func (x *TaskForgotten) IDs() []string {
	if x == nil {
		return nil
	}
	ids := make([]string, 0, 1+len(x.MoreTaskIds))
	if x.TaskId != "" {
		ids = append(ids, x.TaskId)
	}
	return append(ids, x.MoreTaskIds...)
}
