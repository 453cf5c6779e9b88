CREATE TABLE `lineage_evals` (
	`eval_id` text PRIMARY KEY NOT NULL,
	`run_id` text NOT NULL,
	`benchmark` text NOT NULL,
	`created_at` text NOT NULL,
	`created_at_ms` integer NOT NULL,
	`report` text NOT NULL,
	`recorded_at` text NOT NULL,
	FOREIGN KEY (`run_id`) REFERENCES `lineage_runs`(`run_id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `lineage_evals_run_idx` ON `lineage_evals` (`run_id`,`benchmark`,`created_at_ms`);--> statement-breakpoint
CREATE TABLE `lineage_results` (
	`run_id` text PRIMARY KEY NOT NULL,
	`status` text NOT NULL,
	`finished_at` text NOT NULL,
	`result` text NOT NULL,
	`recorded_at` text NOT NULL,
	FOREIGN KEY (`run_id`) REFERENCES `lineage_runs`(`run_id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `lineage_results_status_idx` ON `lineage_results` (`status`);--> statement-breakpoint
CREATE TABLE `lineage_runs` (
	`run_id` text PRIMARY KEY NOT NULL,
	`harness_run_id` text,
	`artifact_id` text NOT NULL,
	`deploy_id` text,
	`target` text,
	`dataset_id` text NOT NULL,
	`dataset_version` text NOT NULL,
	`started_at` text NOT NULL,
	`started_at_ms` integer NOT NULL,
	`manifest` text NOT NULL,
	`recorded_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `lineage_runs_artifact_idx` ON `lineage_runs` (`artifact_id`,`started_at_ms`);--> statement-breakpoint
CREATE INDEX `lineage_runs_dataset_idx` ON `lineage_runs` (`dataset_version`,`started_at_ms`);--> statement-breakpoint
CREATE INDEX `lineage_runs_started_idx` ON `lineage_runs` (`started_at_ms`);