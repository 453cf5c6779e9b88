CREATE TABLE `token_audit` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`run_id` text NOT NULL,
	`token_id` text NOT NULL,
	`action` text NOT NULL,
	`actor` text NOT NULL,
	`at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `token_audit_run_idx` ON `token_audit` (`run_id`);--> statement-breakpoint
ALTER TABLE `run_tokens` ADD `prefix` text;--> statement-breakpoint
ALTER TABLE `run_tokens` ADD `revoked_at` text;