CREATE TABLE `llm_calls` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`run_id` text NOT NULL,
	`role` text NOT NULL,
	`model` text NOT NULL,
	`outcome` text NOT NULL,
	`latency_ms` integer NOT NULL,
	`prompt_tokens` integer NOT NULL,
	`completion_tokens` integer NOT NULL,
	`request_id` text,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `llm_calls_run_idx` ON `llm_calls` (`run_id`,`created_at`);--> statement-breakpoint
CREATE TABLE `run_tokens` (
	`token_hash` text PRIMARY KEY NOT NULL,
	`run_id` text NOT NULL,
	`created_at` text NOT NULL,
	FOREIGN KEY (`run_id`) REFERENCES `runs`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `run_tokens_run_idx` ON `run_tokens` (`run_id`);--> statement-breakpoint
CREATE TABLE `runs` (
	`id` text PRIMARY KEY NOT NULL,
	`config` text NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `score_events` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`run_id` text NOT NULL,
	`instance_id` text NOT NULL,
	`rollout_id` text NOT NULL,
	`step` integer NOT NULL,
	`rubric_version` integer NOT NULL,
	`score` real NOT NULL,
	`criteria` text NOT NULL,
	`cached` integer NOT NULL,
	`duplicate` integer NOT NULL,
	`request_id` text NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `score_events_run_step_idx` ON `score_events` (`run_id`,`step`);