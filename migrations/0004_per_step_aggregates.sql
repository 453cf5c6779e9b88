DROP TABLE `llm_calls`;--> statement-breakpoint
DROP TABLE `score_events`;