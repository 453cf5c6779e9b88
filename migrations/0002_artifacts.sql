CREATE TABLE `rm_artifact_rubrics` (
	`artifact_id` text NOT NULL,
	`prompt_id` text NOT NULL,
	`rubric` text NOT NULL,
	PRIMARY KEY(`artifact_id`, `prompt_id`),
	FOREIGN KEY (`artifact_id`) REFERENCES `rm_artifacts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE TABLE `rm_artifacts` (
	`id` text PRIMARY KEY NOT NULL,
	`schema_version` text NOT NULL,
	`source_run_id` text NOT NULL,
	`source_session_id` text NOT NULL,
	`dataset_sha256` text NOT NULL,
	`config_hash` text NOT NULL,
	`backend` text NOT NULL,
	`rubric_count` integer NOT NULL,
	`created_at_utc` text NOT NULL,
	`meta` text NOT NULL,
	`stored_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `rm_deployments` (
	`seq` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`deploy_id` text NOT NULL,
	`target` text NOT NULL,
	`artifact_id` text NOT NULL,
	`previous_artifact_id` text,
	`deployed_by` text NOT NULL,
	`deployed_at` text NOT NULL,
	`action` text NOT NULL,
	`dataset_sha256` text NOT NULL,
	`config_hash` text NOT NULL,
	`llm` text,
	FOREIGN KEY (`artifact_id`) REFERENCES `rm_artifacts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `rm_deployments_deploy_id_unique` ON `rm_deployments` (`deploy_id`);--> statement-breakpoint
CREATE INDEX `rm_deployments_target_seq_idx` ON `rm_deployments` (`target`,`seq`);